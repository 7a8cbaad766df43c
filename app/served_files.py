"""What Gradio may serve: only the dashboard's own downloads, never the server's folders.

Gradio serves (``/gradio_api/file=``) what lies in its upload folder and its ``allowed_paths``, and copies into that
folder, to serve, any file an output names in the working directory or the temp folder (``tempfile.gettempdir()``),
which its ``_check_allowed`` always allows. :func:`confine_gradio` (called once by :func:`app.server.serve`, before
the page is built) leaves it only a private folder of this server:

* a fresh folder ``<temp>/grpo-dashboard-XXXX`` (mode 0711) holds Gradio's upload folder (``GRADIO_TEMP_DIR``,
  mode 0700, unless the admin set one) and the process's temp folder (``tempfile.tempdir``, mode 1777 as the system's,
  for the code sandbox's uids), so "the temp folder" Gradio allows is empty but for what the dashboard itself
  writes there;
* ``blocked_paths`` (checked by Gradio before anything else, on the way out and on ``/file=``) hold the working
  directory, the data directory, the shared directory, the store file and the auth file;
* no ``allowed_paths``: an export is offered by :meth:`ServedFiles.offer`, a link (or copy) of the file under a
  folder of 128 random bits in the upload folder, handed only to the login that asked; Gradio serves it under its
  own keyed content hash, and :class:`OfferedFilesGuard` answers 404 to any other login asking for either.

The default data directory (``./grpo_data``) lies in the working directory: blocked with it.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import PlainTextResponse

from grpo_core.settings import Settings

OFFERED_DIR_NAME = "offered"


@dataclass(frozen=True)
class ServedFiles:
    """The folders :func:`confine_gradio` chose: ``root`` (private, removed at exit), ``uploads`` (Gradio's upload
    folder), ``blocked`` (what Gradio may never read); ``owners``: each offered file, and the copy Gradio makes of it
    in its cache, with the logins it was offered to (read by :class:`OfferedFilesGuard`)."""

    root: Path
    uploads: Path
    blocked: tuple[Path, ...]
    owners: dict[str, set[str | None]] = field(default_factory=dict)

    def offer(self, path: str | Path | None, login: str | None = None) -> str | None:
        """A path Gradio may serve holding ``path``'s content, for ``login`` only: a hard link (a copy across file
        systems) in a fresh folder of 128 random bits under the upload folder, named as ``path`` is. ``None`` stays
        ``None``.

        Raises:
            OSError: the file cannot be read or linked.
        """
        if path is None:
            return None
        source = Path(path)
        folder = self.uploads / OFFERED_DIR_NAME / secrets.token_hex(16)
        folder.mkdir(parents=True, mode=0o700)
        dest = folder / source.name
        try:
            os.link(source, dest)
        except OSError:
            shutil.copyfile(source, dest)
        from gradio.processing_utils import hash_file  # where Gradio will copy it to serve it (save_file_to_cache)
        from gradio_client.utils import strip_invalid_filename_characters

        cached = self.uploads / hash_file(dest) / strip_invalid_filename_characters(dest.name)
        for served in (dest, cached):
            self.owners.setdefault(os.path.realpath(served), set()).add(login)
        return str(dest)


class OfferedFilesGuard:
    """ASGI middleware: a request for an offered file, or Gradio's cached copy of it (``/gradio_api/file=PATH``,
    ``/file=PATH``, ``/file/PATH``), from a login it was not offered to answers 404, as a file that is not there."""

    def __init__(self, app: Any, served: ServedFiles) -> None:
        self.app = app
        self.served = served

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            path = unquote(scope.get("path", ""))
            for marker in ("/file=", "/file/"):
                if marker in path:
                    owners = self.served.owners.get(os.path.realpath(path.split(marker, 1)[1]))
                    if owners is not None and _login(scope) not in owners:
                        await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
                        return
                    break
        await self.app(scope, receive, send)


def _login(scope: dict) -> str | None:
    """The login of a request, as Gradio's own ``get_current_user`` reads it (its session cookie)."""
    app = scope.get("app")
    cookie_id = getattr(app, "cookie_id", None)
    cookies = Request(scope).cookies
    token = cookies.get(f"access-token-{cookie_id}") or cookies.get(f"access-token-unsecure-{cookie_id}")
    return getattr(app, "tokens", {}).get(token)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def confine_gradio(settings: Settings, private_files: Iterable[str | Path | None] = ()) -> ServedFiles:
    """Give Gradio a private upload and temp folder and block the server's own folders (see the module docstring).
    Call before any component is built (a component reads ``GRADIO_TEMP_DIR`` when made).

    ``private_files``: more files Gradio may never read (the auth file).

    A folder that holds the private one (a server started in the temp folder or at ``/``) cannot be blocked: it is
    left out with a warning on standard error.
    """
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="grpo-dashboard-")))
    atexit.register(shutil.rmtree, root, True)
    uploads = Path(os.path.realpath(os.environ.get("GRADIO_TEMP_DIR") or root / "gradio"))
    uploads.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ["GRADIO_TEMP_DIR"] = str(uploads)
    # the process's temp folder, as the system's is: other accounts may write there (the code sandbox runs its
    # scripts as a uid of its own, in a folder it gets from tempfile); the upload folder stays the server's own
    private_tmp = root / "tmp"
    private_tmp.mkdir()
    private_tmp.chmod(0o1777)
    root.chmod(0o711)
    tempfile.tempdir = str(private_tmp)
    candidates = [Path.cwd(), settings.data_dir, settings.worker_files_dir, settings.store_file,
                  *(Path(p) for p in private_files if p)]
    blocked: list[Path] = []
    for candidate in candidates:
        if candidate is None:
            continue
        real = Path(os.path.realpath(candidate))
        if _inside(uploads, real) or _inside(private_tmp, real):
            print(f"WARNING: {real} holds Gradio's upload folder {uploads}, so it cannot be kept from Gradio: "
                  "serve from another folder", file=sys.stderr, flush=True)
            continue
        if real not in blocked:
            blocked.append(real)
    return ServedFiles(root=root, uploads=uploads, blocked=tuple(blocked))
