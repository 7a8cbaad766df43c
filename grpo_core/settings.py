"""Settings read once at an entry point (CLI flags, then environment variables, then defaults) and passed in."""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlalchemy.engine import make_url

from grpo_core.access.logins import (
    DEFAULT_MAX_UPLOAD_MB,
    AccessError,
    Credentials,
    load_credentials,
    read_auth_admins,
    read_auth_code_runners,
)
from grpo_core.alerts.targets import RUN_WEBHOOKS, parse_allowed_host
from grpo_core.training.cpu_share import (
    DEFAULT_WORKER_CPU_THREADS,
    DEFAULT_WORKER_NICE,
    ENV_WORKER_CPU_THREADS,
    ENV_WORKER_NICE,
    parse_cpu_threads,
    parse_worker_nice,
)
from storage import sqlite_url

ENV_DATA_DIR = "GRPO_DATA_DIR"
ENV_DB_URL = "GRPO_DB_URL"
ENV_HOST = "GRPO_HOST"
ENV_PORT = "GRPO_PORT"
ENV_MAX_CONCURRENT_RUNS = "GRPO_MAX_CONCURRENT_RUNS"
ENV_AUTH = "GRPO_AUTH"
ENV_AUTH_FILE = "GRPO_AUTH_FILE"
ENV_MAX_UPLOAD_MB = "GRPO_MAX_UPLOAD_MB"
ENV_WEBHOOK_URL = "GRPO_WEBHOOK_URL"
ENV_WEBHOOK_ALLOW_HOSTS = "GRPO_WEBHOOK_ALLOW_HOSTS"
ENV_RUN_WEBHOOKS = "GRPO_RUN_WEBHOOKS"
ENV_EXECUTOR = "GRPO_EXECUTOR"
ENV_RAY_ADDRESS = "GRPO_RAY_ADDRESS"
ENV_SHARED_DIR = "GRPO_SHARED_DIR"
ENV_PLUGIN_DIRS = "GRPO_PLUGIN_DIRS"
ENV_PLUGIN_PACKAGES = "GRPO_PLUGIN_PACKAGES"
ENV_DATASET_ROOTS = "GRPO_DATASET_ROOTS"
ENV_MODEL_ROOTS = "GRPO_MODEL_ROOTS"
ENV_ALLOW_REMOTE_CODE = "GRPO_ALLOW_REMOTE_CODE"
EXECUTORS = ("local", "ray")

OWNER_ONLY_DIR = 0o700
OWNER_ONLY_FILE = 0o600

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """Where the dashboard keeps its state and how it serves.

    Attributes:
        data_dir: root of the store file, uploaded datasets, run folders and the converted-model cache.
        db_url: SQLAlchemy URL of the store (default: SQLite file ``<data_dir>/grpo.db``).
        host, port: where the web server listens.
        max_concurrent_runs: runs training at once; further runs wait as ``queued``.
        poll_interval_s: how often the launcher looks for queued, finished and dead runs (seconds).
        cancel_grace_s: least seconds a cancelled run gets to stop at a step boundary before its process group is
            killed; a run whose steps take longer gets 3 times its longest recent step plus this
            (:mod:`grpo_core.training.cancel_grace`).
        auth: ``((user, password), ...)`` that Gradio's login accepts; empty: no login (left out of ``repr``).
        max_upload_mb: largest dataset upload accepted, in binary megabytes (Gradio's limit and the importer's).
        webhook_url: where run alerts go when a run sets none (:mod:`grpo_core.alerts.webhooks`); empty: no alerts.
        webhook_allow_hosts: host names, addresses or CIDR networks webhooks may reach although internal (loopback,
            private, this machine); see :mod:`grpo_core.alerts.targets`.
        run_webhooks: who may set a run's own ``webhook_url``: ``all``, ``admins`` or ``none``; empty: ``all``
            without logins, ``admins`` with them.
        admins: logins that may change anyone's runs (``[admin]`` lines of the auth file; see
            :mod:`grpo_core.access.ownership`).
        executor: where workers train: ``"local"`` (child processes of the web process) or ``"ray"`` (Ray jobs on
            the cluster at ``ray_address``; see :mod:`grpo_core.training.executors`).
        ray_address: the Ray cluster's job submission address (its dashboard, ``http://HEAD:8265``).
        shared_dir: a folder every node of the cluster sees at the same path; when set, run folders, stored
            datasets and the converted-model cache live under it instead of under ``data_dir``.
        plugin_dirs: folders whose ``.py`` files (and modules) logins may name as reward plugins
            (``--plugin-dir``); resolved. See :mod:`grpo_core.access.boundary`.
        plugin_packages: installed packages whose ``module:function`` targets logins may name
            (``--plugin-package``).
        dataset_roots, model_roots: folders besides the data directory whose files logins may name as
            ``dataset_path`` / ``model`` (``--dataset-root``, ``--model-root``); resolved.
        allow_remote_code: logins may set ``trust_remote_code`` (``--allow-remote-code``).
        code_runners: logins the auth file marks ``[run-code]``: they may name any plugin and set
            ``trust_remote_code``.
        auth_file: the auth file ``auth`` was read from (``--auth-file``), read again while serving when it changes
            (:class:`grpo_core.access.auth_file.LoginRegistry`); ``None``: none.
        ingest_max_runs: runs a login may create through the ingest API (its API tokens together); 0: no limit.
        worker_nice, worker_cpu_threads: how a local worker of a CPU run shares the machine with the web process
            (``GRPO_WORKER_NICE``, ``GRPO_WORKER_CPU_THREADS``): niceness added, torch threads
            (:mod:`grpo_core.training.cpu_share`).
    """

    data_dir: Path
    db_url: str
    host: str = "127.0.0.1"
    port: int = 7860
    max_concurrent_runs: int = 1
    poll_interval_s: float = 2.0
    cancel_grace_s: float = 60.0
    auth: Credentials = field(default=(), repr=False)
    max_upload_mb: int = DEFAULT_MAX_UPLOAD_MB
    admins: frozenset[str] = frozenset()
    webhook_url: str = ""
    webhook_allow_hosts: tuple[str, ...] = ()
    run_webhooks: str = ""
    executor: str = "local"
    ray_address: str = ""
    shared_dir: Path | None = None
    plugin_dirs: tuple[Path, ...] = ()
    plugin_packages: tuple[str, ...] = ()
    dataset_roots: tuple[Path, ...] = ()
    model_roots: tuple[Path, ...] = ()
    allow_remote_code: bool = False
    code_runners: frozenset[str] = frozenset()
    auth_file: Path | None = None
    ingest_max_runs: int = 100
    worker_nice: int = DEFAULT_WORKER_NICE
    worker_cpu_threads: str = DEFAULT_WORKER_CPU_THREADS

    @property
    def worker_files_dir(self) -> Path:
        """Root of what a worker reads and writes besides the store: ``shared_dir`` when set, else ``data_dir``."""
        return self.shared_dir if self.shared_dir is not None else self.data_dir

    @property
    def runs_dir(self) -> Path:
        """Folder holding one sub-folder per run (config YAML, log, checkpoints, adapter)."""
        return self.worker_files_dir / "runs"

    @property
    def datasets_dir(self) -> Path:
        """Folder holding the normalised JSONL of each uploaded dataset."""
        return self.worker_files_dir / "datasets"

    @property
    def model_cache_dir(self) -> Path:
        """Folder holding models converted from GGUF to safetensors, keyed by the GGUF's hash."""
        return self.worker_files_dir / "models"

    @property
    def store_file(self) -> Path | None:
        """The SQLite file of the store (``db_url``), ``None`` for a server database or an in-memory one."""
        url = make_url(self.db_url)
        if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
            return None
        return Path(url.database).expanduser().resolve()

    def ensure_dirs(self) -> None:
        """Create the data folders if missing, and the SQLite store file; both readable by their owner only.

        The data folder gets mode 0700 and the store file (with SQLite's ``-wal``/``-shm`` files, which SQLite
        creates with the store file's mode) 0600, created so or, when found more open (a data folder made by an
        earlier version, a permissive umask), restricted with a logged warning. Model-written code run by the code
        reward rules, and other users of the host, must not read the store.

        Raises:
            OSError: a folder or the store file cannot be created, or its mode cannot be changed (not its owner).
        """
        for path in (self.data_dir, self.worker_files_dir, self.runs_dir, self.datasets_dir, self.model_cache_dir):
            path.mkdir(parents=True, exist_ok=True, mode=OWNER_ONLY_DIR)
        _restrict(self.data_dir, OWNER_ONLY_DIR)
        store = self.store_file
        if store is None:
            return
        store.parent.mkdir(parents=True, exist_ok=True, mode=OWNER_ONLY_DIR)
        os.close(os.open(store, os.O_CREAT | os.O_RDWR, OWNER_ONLY_FILE))  # an existing file keeps its mode here
        for path in (store, store.with_name(store.name + "-wal"), store.with_name(store.name + "-shm")):
            if path.exists():
                _restrict(path, OWNER_ONLY_FILE)

    def with_overrides(self, **changes) -> Settings:
        """A copy with some fields changed."""
        return replace(self, **changes)


def _restrict(path: Path, mode: int) -> None:
    """``chmod`` ``path`` to ``mode`` if its group or others have any permission on it (logged as a warning)."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & 0o077:
        log.warning("%s was readable beyond its owner (mode %o); restricting it to %o", path, current, mode)
        path.chmod(mode)


def load_settings(
    *,
    data_dir: str | Path | None = None,
    db_url: str | None = None,
    host: str | None = None,
    port: int | None = None,
    max_concurrent_runs: int | None = None,
    max_upload_mb: int | None = None,
    webhook_url: str | None = None,
    webhook_allow_hosts: list[str] | tuple[str, ...] | None = None,
    run_webhooks: str | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    shared_dir: str | Path | None = None,
    plugin_dirs: list[str] | None = None,
    plugin_packages: list[str] | None = None,
    dataset_roots: list[str] | None = None,
    model_roots: list[str] | None = None,
    allow_remote_code: bool | None = None,
) -> Settings:
    """Settings from explicit values, else ``GRPO_*`` environment variables, else defaults.

    The login credentials are not read here (workers and ``train`` need none): ``serve`` adds :func:`load_auth`'s.
    Folder lists (``plugin_dirs``, ``dataset_roots``, ``model_roots``) come from the flags when given, else from
    ``GRPO_PLUGIN_DIRS`` / ``GRPO_DATASET_ROOTS`` / ``GRPO_MODEL_ROOTS`` (separated by ``os.pathsep``); packages
    from ``GRPO_PLUGIN_PACKAGES`` (separated by commas); ``GRPO_ALLOW_REMOTE_CODE=1`` allows ``trust_remote_code``.

    Raises:
        ValueError: ``GRPO_PORT``, ``GRPO_MAX_CONCURRENT_RUNS`` or ``GRPO_MAX_UPLOAD_MB`` is not a whole number,
            the upload limit is below 1 MB, the executor is neither ``local`` nor ``ray``, or it is ``ray`` without
            a Ray address; a webhook allowed host is neither a name, an address nor a network, or
            ``run_webhooks`` is not one of ``all``, ``admins``, ``none``; a plugin folder or root that is not an
            existing folder, a plugin folder overlapping the data directory or the upload folders, or a plugin
            package that is not a dotted module name; ``GRPO_WORKER_NICE`` or ``GRPO_WORKER_CPU_THREADS`` is not
            one :mod:`grpo_core.training.cpu_share` accepts.
    """
    env = os.environ
    root = Path(data_dir or env.get(ENV_DATA_DIR) or "grpo_data").expanduser().resolve()
    url = db_url or env.get(ENV_DB_URL) or sqlite_url(root / "grpo.db")

    def _int(value: int | None, name: str, default: int) -> int:
        if value is not None:
            return int(value)
        raw = env.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"environment variable {name}={raw!r} is not a whole number") from None

    upload_mb = _int(max_upload_mb, ENV_MAX_UPLOAD_MB, DEFAULT_MAX_UPLOAD_MB)
    if upload_mb < 1:
        raise AccessError(f"the upload limit must be at least 1 MB, got {upload_mb}")
    concurrent = _int(max_concurrent_runs, ENV_MAX_CONCURRENT_RUNS, 1)
    if concurrent < 1:
        raise ValueError(f"max concurrent runs must be at least 1, got {concurrent}")
    chosen = (executor or env.get(ENV_EXECUTOR) or "local").strip().lower()
    if chosen not in EXECUTORS:
        raise ValueError(f"the executor is one of {', '.join(EXECUTORS)}, not {chosen!r}")
    address = (ray_address or env.get(ENV_RAY_ADDRESS) or "").strip()
    if chosen == "ray" and not address:
        raise ValueError("the ray executor needs the cluster's address: --ray-address http://HEAD:8265 "
                         f"(or {ENV_RAY_ADDRESS})")
    shared = shared_dir or env.get(ENV_SHARED_DIR) or None
    allowed = list(webhook_allow_hosts) if webhook_allow_hosts else \
        (env.get(ENV_WEBHOOK_ALLOW_HOSTS) or "").replace(",", " ").split()
    for host in allowed:
        parse_allowed_host(host)
    who = (run_webhooks or env.get(ENV_RUN_WEBHOOKS) or "").strip().lower()
    if who and who not in RUN_WEBHOOKS:
        raise ValueError(f"run webhooks: one of {', '.join(RUN_WEBHOOKS)}, not {who!r}")
    shared_path = Path(shared).expanduser().resolve() if shared else None
    plugin_folders = _folders(plugin_dirs, ENV_PLUGIN_DIRS, "--plugin-dir")
    _refuse_writable_plugin_dirs(plugin_folders, [root] + ([shared_path] if shared_path else []))
    return Settings(
        data_dir=root,
        db_url=url,
        host=host or env.get(ENV_HOST) or "127.0.0.1",
        port=_int(port, ENV_PORT, 7860),
        max_concurrent_runs=concurrent,
        max_upload_mb=upload_mb,
        webhook_url=(webhook_url or env.get(ENV_WEBHOOK_URL) or "").strip(),
        webhook_allow_hosts=tuple(host.strip() for host in allowed),
        run_webhooks=who,
        executor=chosen,
        ray_address=address,
        shared_dir=shared_path,
        plugin_dirs=plugin_folders,
        plugin_packages=_packages(plugin_packages),
        dataset_roots=_folders(dataset_roots, ENV_DATASET_ROOTS, "--dataset-root"),
        model_roots=_folders(model_roots, ENV_MODEL_ROOTS, "--model-root"),
        allow_remote_code=bool(allow_remote_code) if allow_remote_code is not None
        else env.get(ENV_ALLOW_REMOTE_CODE, "").strip().lower() in ("1", "true", "yes"),
        worker_nice=parse_worker_nice(env.get(ENV_WORKER_NICE)),
        worker_cpu_threads=parse_cpu_threads(env.get(ENV_WORKER_CPU_THREADS)),
    )


def _folders(given: list[str] | None, env_name: str, flag: str) -> tuple[Path, ...]:
    """Folders from a repeated flag, else from ``env_name`` (``os.pathsep``-separated), resolved (symbolic links
    followed: containment is checked on real paths).

    Raises:
        ValueError: one is not an existing folder (named with ``flag``).
    """
    raw = list(given) if given else [p for p in os.environ.get(env_name, "").split(os.pathsep) if p.strip()]
    folders = []
    for item in raw:
        path = Path(os.path.realpath(Path(item.strip()).expanduser()))
        if not path.is_dir():
            raise ValueError(f"{flag} {item}: not an existing folder")
        if path not in folders:
            folders.append(path)
    return tuple(folders)


def upload_folders() -> list[Path]:
    """Where logins' files land on this machine besides the data directory: Gradio's upload cache
    (``GRADIO_TEMP_DIR``, else ``<temp>/gradio``, as Gradio places it)."""
    gradio = os.environ.get("GRADIO_TEMP_DIR")
    return [Path(os.path.realpath(gradio or Path(tempfile.gettempdir()) / "gradio"))]


def _refuse_writable_plugin_dirs(plugin_dirs: tuple[Path, ...], data_folders: list[Path]) -> None:
    """A plugin folder must hold only what the admin put there: refuse one that overlaps (is, holds, or lies in) the
    data directory, the shared directory or a folder where uploads land (:func:`upload_folders`), since any login
    could then write a plugin file.

    Raises:
        ValueError: naming the plugin folder and the folder it overlaps.
    """
    for folder in plugin_dirs:
        for other in [Path(os.path.realpath(p)) for p in data_folders] + upload_folders():
            if folder == other or other in folder.parents or folder in other.parents:
                raise ValueError(f"--plugin-dir {folder}: overlaps {other}, where logins' uploads, datasets or runs "
                                 "are written; give a folder only the admin writes to")


def _packages(given: list[str] | None) -> tuple[str, ...]:
    """Allowed plugin packages from a repeated flag, else ``GRPO_PLUGIN_PACKAGES`` (comma-separated).

    Raises:
        ValueError: one is not a dotted module name.
    """
    raw = list(given) if given else os.environ.get(ENV_PLUGIN_PACKAGES, "").split(",")
    names = []
    for item in (part.strip() for part in raw):
        if not item:
            continue
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", item):
            raise ValueError(f"--plugin-package {item!r}: not a dotted module name")
        names.append(item)
    return tuple(dict.fromkeys(names))


def load_auth(auth: str | None = None, auth_file: str | Path | None = None) -> Credentials:
    """The dashboard's login credentials: ``auth`` (else ``GRPO_AUTH``) and the lines of ``auth_file`` (else
    ``GRPO_AUTH_FILE``); both may be given, and every user listed may log in. Empty: no login.

    Raises:
        grpo_core.access.logins.AccessError: a malformed ``USER:PASSWORD``, an unreadable or empty file, a user twice.
    """
    env = os.environ
    return load_credentials(auth or env.get(ENV_AUTH) or None, auth_file or env.get(ENV_AUTH_FILE) or None)


def load_admins(auth_file: str | Path | None = None) -> frozenset[str]:
    """The admin logins: the ``[admin]`` lines of ``auth_file`` (else ``GRPO_AUTH_FILE``); empty without a file.

    Raises:
        grpo_core.access.logins.AccessError: as :func:`load_auth`.
    """
    path = auth_file or os.environ.get(ENV_AUTH_FILE) or None
    return read_auth_admins(path) if path else frozenset()


def load_code_runners(auth_file: str | Path | None = None) -> frozenset[str]:
    """The logins the auth file (else ``GRPO_AUTH_FILE``) marks ``[run-code]``; empty without a file.

    Raises:
        grpo_core.access.logins.AccessError: as :func:`load_auth`.
    """
    path = auth_file or os.environ.get(ENV_AUTH_FILE) or None
    return read_auth_code_runners(path) if path else frozenset()


ENV_INGEST_MAX_RUNS = "GRPO_INGEST_MAX_RUNS"


def load_ingest_max_runs(value: int | None = None) -> int:
    """Runs a login may create through the ingest API: ``value`` (``--ingest-max-runs``), else
    ``GRPO_INGEST_MAX_RUNS``, else 100; 0 means no limit.

    Raises:
        ValueError: a negative or non-integer value.
    """
    raw = value if value is not None else os.environ.get(ENV_INGEST_MAX_RUNS, "100")
    try:
        number = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_INGEST_MAX_RUNS}: {raw!r} is not a whole number") from None
    if number < 0:
        raise ValueError(f"--ingest-max-runs / {ENV_INGEST_MAX_RUNS}: {number} is negative")
    return number


def auth_file_path(auth_file: str | Path | None = None) -> Path | None:
    """The auth file: ``auth_file`` (``--auth-file``), else ``GRPO_AUTH_FILE``; ``None`` without one."""
    path = auth_file or os.environ.get(ENV_AUTH_FILE) or None
    return Path(path) if path else None
