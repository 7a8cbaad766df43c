"""What a login may make the server run or read: the boundary of a dashboard served with several logins.

Served with several logins (``--auth-file``), the dashboard is a team's shared tool and the server's account is not the
logins': code runs on the server only where an admin allowed it, and files are read only from folders an admin
serves (docs/security.md has the threat model). :func:`boundary_for` gives the :class:`Boundary` of one actor:

* **code** (a ``plugin`` reward rule's ``target``): a ``file.py:function`` whose real path lies in a plugin folder
  (``--plugin-dir``), a ``module:function`` of an allowed package (``--plugin-package``) or a module file of a plugin
  folder; the function must be defined in that file or its own package (a name it only imports, ``os`` in
  ``file.py:os.system``, is refused: the source is parsed, not run). ``trust_remote_code`` (a model's own Python code) only with ``--allow-remote-code``. A login the auth
  file marks ``[run-code]`` may name anything, as may the single user of a dashboard served without a login.
* **files** (``dataset_path``, ``model``, a reward model's folder): real paths inside the data directory or an
  admin's root (``--dataset-root``, ``--model-root``); hub ids and the packaged default model stay open.

Every check happens here, in the web process, before anything is imported or read: the file system is only asked
for real paths (``os.path.realpath``), and a path outside gets the same message whether it exists or not. The
config that passes has its paths replaced by the real paths checked, so the worker reads and imports exactly what
was allowed (a symbolic link changed afterwards does not redirect it). Pure apart from resolving paths and reading
plugin files' source (parsed with :mod:`ast`, never executed).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.access.ownership import Actor
from grpo_core.models.source import DEFAULT_MODEL_ALIASES
from grpo_core.rewards.compose import RewardSpec
from grpo_core.rewards.plugin import parse_plugin_target
from grpo_core.run_config import DEFAULT_MODEL, ConfigError, RunConfig

#: ``trl_args`` fields that take a path on the server as text (a JSON file TRL or Accelerate reads).
PATH_TRL_ARGS = ("accelerator_config", "deepspeed", "fsdp_config")
REMOTE_CODE_KEY = "trust_remote_code"
#: ``trl_args`` fields that send the worker to a host (a vLLM server) or to the hub with the server's credentials
#: (pushing completions, a trackio Space or bucket): an admin's choice, not a login's.
NETWORK_TRL_ARGS = ("vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_group_port", "hub_token",
                    "log_completions_hub_repo", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id")
#: ``model_init_kwargs`` keys a login may set (``from_pretrained``'s others name files and folders to read or write,
#: credentials, proxies, unpickling, or code: ``cache_dir``, ``offload_folder``, ``gguf_file``, ``weights_only``...).
MODEL_INIT_KWARGS_ALLOWED = ("dtype", "torch_dtype", "attn_implementation", "low_cpu_mem_usage", "device_map",
                             "use_cache", "max_memory", "revision")
#: Words (``_``-separated parts of a key, at any depth of a ``trl_args`` mapping: a DeepSpeed or FSDP config,
#: generation kwargs) that name a file, folder, host or credential (DeepSpeed's ``nvme_path``, a monitor's
#: ``output_path``, ``cache_dir``); a key ending in ``token`` (``hub_token``) or naming code (``custom_generate``).
_SERVER_RESOURCE_WORDS = frozenset({"path", "paths", "dir", "dirs", "directory", "file", "files", "filename", "folder",
                                    "url", "uri", "host", "hostname", "endpoint", "proxy", "proxies", "repo",
                                    "socket", "password", "secret", "credentials", "key"})
_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


class BoundaryError(ConfigError):
    """A config (or a reward rule) that asks the server to run code or read a file this login may not; the message
    names the field and who may allow it, never whether an outside path exists."""


@dataclass(frozen=True)
class Boundary:
    """What one actor may make the server run or read.

    Attributes:
        enforced: False for the single user of a dashboard without a login (everything allowed, as before).
        may_run_code: the login is marked ``[run-code]``: any plugin, ``trust_remote_code``.
        plugin_dirs: real paths of the admin's plugin folders.
        plugin_packages: installed packages whose modules are allowed plugin targets.
        dataset_roots: real paths under which ``dataset_path`` may point (the data directory first).
        model_roots: real paths under which a model folder or ``.gguf`` may lie (the data directory first).
        allow_remote_code: the admin allows ``trust_remote_code`` to every login.
    """

    enforced: bool = False
    may_run_code: bool = False
    plugin_dirs: tuple[Path, ...] = ()
    plugin_packages: tuple[str, ...] = ()
    dataset_roots: tuple[Path, ...] = ()
    model_roots: tuple[Path, ...] = ()
    allow_remote_code: bool = False

    @property
    def limits_code(self) -> bool:
        """True when plugin targets and ``trust_remote_code`` are checked for this actor."""
        return self.enforced and not self.may_run_code

    def check_config(self, config: RunConfig) -> RunConfig:
        """``config`` with its dataset path, model and plugin targets replaced by the real paths allowed.

        Returns ``config`` unchanged for the single user.

        Raises:
            BoundaryError: a path outside the roots, a plugin outside the plugin folders and packages, or
                ``trust_remote_code`` where not allowed; the message names the field.
        """
        if not self.enforced:
            return config
        updates: dict[str, Any] = {"rewards": self.check_rewards(config.rewards)}
        updates["tool_plugins"] = [self.plugin_target(t, f"tool plugin {i}") for i, t in
                                   enumerate(config.tool_plugins, start=1)]  # tools and environments: plugin code
        if config.environment:
            updates["environment"] = self.plugin_target(config.environment, "environment")
        if config.dataset_path:
            updates["dataset_path"] = str(self.dataset_file(config.dataset_path, "dataset_path"))
        updates["model"] = self.model(config.model, "model")
        self.check_trl_args(config.trl_args)
        return config.model_copy(update=updates)

    def check_stored(self, config: Mapping[str, Any], action: str) -> None:
        """Refuse ``action`` (``"resume"``, ``"export"``, ...) on a run whose stored config this actor could not
        launch now (a run launched before logins, or by a login with more rights).

        Raises:
            BoundaryError: as :meth:`check_config`, the message starting with ``action``.
        """
        if not self.enforced:
            return
        try:  # the stored mapping's own fields: a config an older version wrote need not validate today
            if config.get("dataset_path") and config.get("dataset_id") is None:
                self.dataset_file(str(config["dataset_path"]), "dataset_path")
            self.model(str(config.get("model") or ""), "model")
            for index, spec in enumerate(config.get("rewards") or [], start=1):
                params = (spec.get("params") or {}) if isinstance(spec, Mapping) else {}
                rule = spec.get("rule") if isinstance(spec, Mapping) else None
                if rule == "plugin":
                    self.plugin_target(str(params.get("target", "")), f"reward rule {index} (plugin)")
                elif rule == "reward_model":
                    self.model(str(params.get("model", "")), f"reward rule {index} (reward_model) model")
            for index, target in enumerate(config.get("tool_plugins") or [], start=1):
                self.plugin_target(str(target), f"tool plugin {index}")
            if config.get("environment"):
                self.plugin_target(str(config["environment"]), "environment")
            trl_args = config.get("trl_args")
            self.check_trl_args(trl_args if isinstance(trl_args, Mapping) else {})
        except BoundaryError as exc:
            raise BoundaryError(f"cannot {action} this run: {exc}") from None

    def check_rewards(self, specs: Sequence[RewardSpec | Mapping[str, Any]]) -> list[RewardSpec]:
        """The reward rules with plugin targets and reward model folders replaced by the real paths allowed.

        Raises:
            BoundaryError: ``reward rule N (plugin): ...`` or ``reward rule N (reward_model): ...``.
        """
        checked = []
        for index, spec in enumerate(specs, start=1):
            spec = spec if isinstance(spec, RewardSpec) else RewardSpec.model_validate(dict(spec))
            if self.enforced and spec.rule == "plugin":
                target = str(spec.params.get("target", ""))
                resolved = self.plugin_target(target, f"reward rule {index} (plugin)")
                spec = spec.model_copy(update={"params": {**spec.params, "target": resolved}})
            elif self.enforced and spec.rule == "reward_model":
                model = str(spec.params.get("model", ""))
                resolved = self.model(model, f"reward rule {index} (reward_model) model")
                spec = spec.model_copy(update={"params": {**spec.params, "model": resolved}})
            checked.append(spec)
        return checked

    # ---------------------------------------------------------------------------------------------------- code

    def plugin_target(self, target: str, where: str) -> str:
        """The target to import: for a file, ``<real path>.py:function``; refused unless allowed. Nothing is
        imported or executed (a file is parsed with :mod:`ast`).

        Raises:
            BoundaryError: the target is outside the plugin folders and packages, or names a function its file
                does not define.
        """
        try:
            module, attribute = parse_plugin_target(target)
        except ValueError as exc:
            raise BoundaryError(f"{where}: {exc}") from None
        if not self.limits_code:
            return target.strip()
        if module.endswith(".py"):
            path = _inside(module, self.plugin_dirs)
            if path is None or not path.is_file():
                raise BoundaryError(f"{where}: {module} is not a file of a plugin folder. {self._code_help()}")
            _require_defined(path, attribute, where)
            return f"{path}:{attribute}"
        package = next((p for p in self.plugin_packages if module == p or module.startswith(p + ".")), None)
        if package is not None:
            path = _installed_module_file(module)
            if path is None:
                raise BoundaryError(f"{where}: the source of {module} (allowed package {package}) cannot be found to "
                                    "check that it defines the function; name a module written in Python")
            _require_defined(path, attribute, where, package=package)
            return f"{module}:{attribute}"
        path = self._plugin_module_file(module)
        if path is None:
            raise BoundaryError(f"{where}: the module {module} is neither in a plugin folder nor in an allowed "
                                f"package. {self._code_help()}")
        _require_defined(path, attribute, where)
        return f"{path}:{attribute}"

    def _plugin_module_file(self, module: str) -> Path | None:
        """The real file of ``module`` (``name`` or ``pkg.sub``) in a plugin folder, found without importing; None
        when no plugin folder holds it or the found file's real path leaves the folder (a symbolic link)."""
        parts = module.split(".")
        for folder in self.plugin_dirs:
            base = folder.joinpath(*parts)
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                path = _inside(str(candidate), (folder,))
                if path is not None and path.is_file():
                    return path
        return None

    def _code_help(self) -> str:
        folders = ", ".join(str(d) for d in self.plugin_dirs) or "none"
        packages = ", ".join(self.plugin_packages) or "none"
        return (f"With logins, reward plugins come only from the admin's plugin folders ({folders}) or allowed "
                f"packages ({packages}); an admin adds them (--plugin-dir, --plugin-package) or marks the login "
                "[run-code] in the auth file")

    def check_trl_args(self, trl_args: Mapping[str, Any]) -> None:
        """Refuse ``trust_remote_code`` anywhere in ``trl_args`` (``model_init_kwargs``, nested, or inside text)
        unless allowed, and, for a login that may not run code, a server path given as text to a field that reads
        one (:data:`PATH_TRL_ARGS`).

        Raises:
            BoundaryError: naming the field.
        """
        if not self.enforced:
            return
        if not (self.may_run_code or self.allow_remote_code):
            for name, value in trl_args.items():
                if _mentions(value, REMOTE_CODE_KEY) or REMOTE_CODE_KEY in name.lower():
                    raise BoundaryError(
                        f"trl_args.{name}: trust_remote_code runs the model's own Python code on the server; with "
                        "logins an admin allows it (--allow-remote-code) or marks the login [run-code]"
                    )
        if not self.may_run_code:
            for name in PATH_TRL_ARGS:
                value = trl_args.get(name)
                if isinstance(value, str) and value.strip() and not value.strip().startswith("{"):
                    raise BoundaryError(f"trl_args.{name}: with logins give it as a mapping, not as a file path on "
                                        "the server")
            self._check_server_resources(trl_args)

    def _check_server_resources(self, trl_args: Mapping[str, Any]) -> None:
        """Refuse, for a login that may not run code, ``trl_args`` that send the worker to a host or the hub
        (:data:`NETWORK_TRL_ARGS`), more data-loader processes than the machine has CPUs, ``model_init_kwargs`` beyond :data:`MODEL_INIT_KWARGS_ALLOWED` (or a hub kernel
        as ``attn_implementation``), and a key naming a file, folder, host or credential at any depth."""
        admin_only = "with logins only an admin's setting (the server's flags) or a [run-code] login may set it"
        for name in NETWORK_TRL_ARGS:
            if name in trl_args:
                raise BoundaryError(f"trl_args.{name}: it sends the worker to another host or to the hub with the "
                                    f"server's credentials; {admin_only}")
        workers = trl_args.get("dataloader_num_workers")
        limit = os.cpu_count() or 1
        if isinstance(workers, (int, float)) and not isinstance(workers, bool) and workers > limit:
            raise BoundaryError(f"trl_args.dataloader_num_workers: {workers} processes, more than this machine's "
                                f"{limit} CPUs; {admin_only}")
        init_kwargs = _as_mapping(trl_args.get("model_init_kwargs"))
        allowed = MODEL_INIT_KWARGS_ALLOWED + ((REMOTE_CODE_KEY,) if self.allow_remote_code else ())
        for key, value in init_kwargs.items():
            if str(key).lower() not in allowed:
                raise BoundaryError(f"trl_args.model_init_kwargs.{str(key)[:80]}: with logins only "
                                    f"{', '.join(allowed)} may be set; {admin_only}")
            if key == "attn_implementation" and "/" in str(value):
                raise BoundaryError("trl_args.model_init_kwargs.attn_implementation: a hub kernel "
                                    f"({str(value)[:80]!r}) is code run on the server; {admin_only}")
        for name, value in trl_args.items():
            key = _resource_key(_as_mapping(value) if isinstance(value, str) else value)
            if key is not None:
                raise BoundaryError(f"trl_args.{name}: the key {key[:80]!r} names a file, folder, host or credential "
                                    f"of the server, or code; {admin_only}")

    # --------------------------------------------------------------------------------------------------- files

    def dataset_file(self, value: str, field: str) -> Path:
        """The real path of a ``dataset_path`` inside the data directory or a ``--dataset-root`` (as given for the
        single user).

        Raises:
            BoundaryError: anywhere else (the same message whether it exists or not).
        """
        if not self.enforced:
            return Path(value)
        path = _inside(value, self.dataset_roots)
        if path is None:
            raise BoundaryError(f"{field}: {_shown(value)} is outside the folders this dashboard reads datasets "
                                "from (its data directory and the admin's --dataset-root folders); add the file as "
                                "a dataset and use dataset_id")
        return path

    def model(self, value: str, field: str) -> str:
        """The model as the worker should load it: the default model and hub ids as given, a local folder or
        ``.gguf`` as its real path inside the data directory or a ``--model-root`` (anything, as given, for the
        single user).

        Raises:
            BoundaryError: a local path anywhere else (the same message whether it exists or not).
        """
        name = (value or "").strip()
        if not self.enforced or not name or name.lower() in DEFAULT_MODEL_ALIASES or name == DEFAULT_MODEL:
            return value
        path = _inside(name, self.model_roots)
        if path is not None:
            return str(path)
        local_shape = name.lower().endswith(".gguf") or not _HUB_ID_RE.match(name) or ".." in name.split("/")
        if local_shape or os.path.lexists(name):
            raise BoundaryError(f"{field}: {_shown(name)} is outside the folders this dashboard loads models from "
                                "(its data directory and the admin's --model-root folders); use a hub id or ask an "
                                "admin")
        return name


OPEN = Boundary()
"""The boundary of the single user and of the command line: everything allowed."""


def _shown(value: str) -> str:
    """A path for a message: as the user wrote it (never its real path), shortened."""
    text = str(value)
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _inside(value: str, roots: Sequence[Path]) -> Path | None:
    """The real path of ``value`` when it lies in one of ``roots`` (real paths themselves), else None.

    Nothing is expanded (``~`` and ``$HOME`` stay literal, a URL stays a relative name); ``..`` and symbolic links
    are resolved before comparing, whole path components are compared (``/plugins-evil`` is not in ``/plugins``).
    """
    text = str(value)
    if not text or "\x00" in text:
        return None
    real = Path(os.path.realpath(text))
    for root in roots:
        if real == root or real.is_relative_to(root):
            return real
    return None


def _mentions(value: Any, key: str) -> bool:
    """True when ``key`` appears in ``value``: as a mapping key at any depth, or inside any text (JSON written as a
    string), ignoring case."""
    if isinstance(value, Mapping):
        return any(key in str(k).lower() or _mentions(v, key) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(_mentions(item, key) for item in value)
    return isinstance(value, str) and key in value.lower()


def _as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` as a mapping: itself, a JSON object given as text (as ``TrainingArguments`` accepts), else empty."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return {}
        return parsed if isinstance(parsed, Mapping) else {}
    return {}


def _resource_key(value: Any, depth: int = 0) -> str | None:
    """The first mapping key at any depth of ``value`` that names a server resource or code
    (:data:`_SERVER_RESOURCE_WORDS`), else None."""
    if depth > 64:
        return "(nested too deep)"
    if isinstance(value, Mapping):
        for key, item in value.items():
            words = re.split(r"[_\-.\s]+", str(key).lower())
            if (_SERVER_RESOURCE_WORDS.intersection(words) or words[-1] == "token"
                    or str(key).lower() == "custom_generate"):
                return str(key)
            found = _resource_key(item, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for item in value:
            found = _resource_key(item, depth + 1)
            if found is not None:
                return found
    return None


def _installed_module_file(module: str) -> Path | None:
    """The source file of an installed ``module`` (``pkg`` or ``pkg.sub.mod``), found on ``sys.path`` without
    importing anything (``importlib.util.find_spec`` of a dotted name would import its parents); None when it is not
    a plain ``.py`` file or package."""
    parts = module.split(".")
    spec = importlib.machinery.PathFinder.find_spec(parts[0])
    if spec is None:
        return None
    if len(parts) == 1:
        origin = Path(spec.origin) if spec.origin else None
        return origin if origin is not None and origin.suffix == ".py" and origin.is_file() else None
    for location in spec.submodule_search_locations or ():
        base = Path(location).joinpath(*parts[1:])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _require_defined(path: Path, attribute: str, where: str, package: str | None = None) -> None:
    """Refuse an attribute whose first name ``path`` does not define itself (``def``, ``class`` or an assignment at
    the top level): a name it only imports (``os`` of ``file.py:os.system``) would reach code outside the folder.
    A name imported from its own package counts as defined: relative imports (``from .parser import parse``) and,
    for an allowed ``package``, absolute imports from inside it.

    Raises:
        BoundaryError: the file cannot be read or parsed, or does not define the name.
    """
    first = attribute.split(".")[0]
    try:
        found = path.stat()
        version = (found.st_mtime_ns, found.st_ctime_ns, found.st_size, found.st_ino)
        defined, imported = _top_level_names(str(path), version, package)
    except (OSError, SyntaxError, ValueError) as exc:
        raise BoundaryError(f"{where}: the plugin file {path.name} cannot be parsed ({type(exc).__name__})") from None
    if first not in defined or first in imported:
        raise BoundaryError(f"{where}: {path.name} does not define {first!r} itself (def, class or assignment at "
                            "its top level); name a function the plugin file defines")


@functools.lru_cache(maxsize=64)
def _top_level_names(path: str, _version: tuple, package: str | None) -> tuple[frozenset, frozenset]:
    """(names ``path`` defines, names it imports) at its top level, parsed once a version (see docs/security.md)."""
    defined: set[str] = set()
    imported: set[str] = set()
    for node in ast.parse(Path(path).read_bytes(), filename=path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom) and _from_own_package(node, package):
            defined.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return frozenset(defined), frozenset(imported)


def _from_own_package(node: ast.ImportFrom, package: str | None) -> bool:
    """True for ``from .x import y`` and, within an allowed ``package``, ``from package.x import y``."""
    if node.level > 0:
        return True
    name = node.module or ""
    return package is not None and (name == package or name.startswith(package + "."))


def boundary_for(settings, actor: Actor) -> Boundary:
    """The :class:`Boundary` of ``actor`` on a dashboard with ``settings`` (:class:`grpo_core.settings.Settings`).

    Open for the single user: no login, or one login only (``--auth USER:PASSWORD``, or an auth file of one line:
    the person who serves it). Enforced for every login of a dashboard with several (admins included: ``[admin]``
    is about runs, ``[run-code]`` about code)."""
    if actor.user is None or len(settings.auth) < 2:
        return Boundary()
    data_roots = tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in (settings.data_dir, settings.worker_files_dir)))
    return Boundary(
        enforced=True,
        may_run_code=actor.user in settings.code_runners,
        plugin_dirs=tuple(Path(os.path.realpath(p)) for p in settings.plugin_dirs),
        plugin_packages=tuple(settings.plugin_packages),
        dataset_roots=data_roots + tuple(Path(os.path.realpath(p)) for p in settings.dataset_roots),
        model_roots=data_roots + tuple(Path(os.path.realpath(p)) for p in settings.model_roots),
        allow_remote_code=settings.allow_remote_code,
    )


@dataclass(frozen=True)
class PluginFile:
    """A ``.py`` file of a plugin folder, as the Launch tab lists it: ``path`` (real), ``sha256`` (hex)."""

    path: Path
    sha256: str


def plugin_files(plugin_dirs: Sequence[Path], limit: int = 200) -> list[PluginFile]:
    """The ``.py`` files directly in the plugin folders (real paths inside their folder), with their SHA-256, at
    most ``limit``; unreadable files are left out."""
    found = []
    for folder in plugin_dirs:
        try:
            entries = sorted(Path(folder).glob("*.py"))
        except OSError:
            continue
        for entry in entries:
            path = _inside(str(entry), (Path(os.path.realpath(folder)),))
            if path is None or not path.is_file():
                continue
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                continue
            found.append(PluginFile(path, digest))
            if len(found) >= limit:
                return found
    return found
