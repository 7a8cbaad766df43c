"""The ``grpo-dashboard`` command: ``serve`` the dashboard, ``train`` a run config headless, or ``sweep`` one (a run
per point of its ``sweep:`` block); ``rescore`` a run's recorded groups with other reward rules.

Settings are read here once (flags, then ``GRPO_*`` environment variables, then defaults) and passed down.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from app.cli.auth import add_auth_command, run_auth_command
from app.cli.integrations import add_integration_commands, run_integration_command
from app.cli.rescore import add_rescore_parser, run_rescore
from grpo_core.preflight.job import add_preflight_arguments
from grpo_core.run_config import RunConfig, parse_run_config


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="data directory: store, datasets, runs (env GRPO_DATA_DIR; default ./grpo_data)")
    parser.add_argument("--db", help="SQLAlchemy URL of the store (env GRPO_DB_URL; default SQLite in the data dir)")
    parser.add_argument(
        "--shared-dir", metavar="DIR",
        help="run folders, stored datasets and converted models under DIR, a path every node of a cluster sees "
        "(env GRPO_SHARED_DIR; default: the data dir)",
    )


def _add_max_concurrent_runs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-concurrent-runs", type=int, help="runs training at once (env GRPO_MAX_CONCURRENT_RUNS; default 1)"
    )


def _add_boundary(parser: argparse.ArgumentParser) -> None:
    """What logins may make the server run or read (docs/security.md); without a login none of it applies."""
    group = parser.add_argument_group("with logins: code and files logins may use (docs/security.md)")
    for flag, metavar, what in (
        ("--plugin-dir", "DIR", "a folder whose .py files logins may name as reward plugins (env GRPO_PLUGIN_DIRS, "
         "separated by the path separator)"),
        ("--plugin-package", "PACKAGE", "an installed package whose module:function targets logins may name "
         "(env GRPO_PLUGIN_PACKAGES, comma-separated)"),
        ("--dataset-root", "DIR", "a folder besides the data dir whose files logins may name as dataset_path "
         "(env GRPO_DATASET_ROOTS)"),
        ("--model-root", "DIR", "a folder besides the data dir whose model folders and .gguf files logins may name "
         "as model or reward model (env GRPO_MODEL_ROOTS)"),
    ):
        group.add_argument(flag, action="append", metavar=metavar, help=f"{what}; repeatable")
    group.add_argument(
        "--allow-remote-code", action="store_true", default=None,
        help="logins may set trust_remote_code (run a model's own Python code; env GRPO_ALLOW_REMOTE_CODE=1); "
        "logins marked [run-code] in the auth file always may",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``grpo-dashboard`` and its sub-commands."""
    parser = argparse.ArgumentParser(
        prog="grpo-dashboard",
        description="Launch, watch and inspect GRPO fine-tuning runs of language models (TRL engine).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the web dashboard", description="Serve the web dashboard.")
    _add_common(serve)
    serve.add_argument("--host", help="address to bind (env GRPO_HOST; default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (env GRPO_PORT; default 7860)")
    _add_max_concurrent_runs(serve)
    serve.add_argument(
        "--auth", metavar="USER:PASSWORD", help="require this login (env GRPO_AUTH; default: no login)"
    )
    serve.add_argument(
        "--auth-file", metavar="FILE",
        help="require a login listed in FILE: one user:<scrypt hash> a line, written by 'grpo-dashboard auth add' "
        "([admin] / [run-code] marks; a plain-text password line is rewritten as its hash) (env GRPO_AUTH_FILE)",
    )
    serve.add_argument(
        "--ingest-max-runs", type=int, metavar="N",
        help="runs one login may create through the ingest API, all its API tokens together (env "
        "GRPO_INGEST_MAX_RUNS; default 100; 0: no limit)",
    )
    serve.add_argument(
        "--webhook-url", metavar="URL",
        help="POST a JSON message here when a run completes, fails or is cancelled, or the run doctor warns "
        "(env GRPO_WEBHOOK_URL; a run's own webhook_url wins)",
    )
    serve.add_argument(
        "--webhook-allow-host", action="append", metavar="HOST",
        help="let webhooks reach HOST although it is internal (loopback, private network, this machine): a host "
        "name, an IP address or a CIDR network; repeatable (env GRPO_WEBHOOK_ALLOW_HOSTS, comma-separated)",
    )
    serve.add_argument(
        "--run-webhooks", choices=["all", "admins", "none"],
        help="who may set a run's own webhook_url (env GRPO_RUN_WEBHOOKS; default: all without logins, admins "
        "with them)",
    )
    serve.add_argument(
        "--max-upload-mb", type=int, metavar="MB", help="largest dataset upload (env GRPO_MAX_UPLOAD_MB; default 200)"
    )
    serve.add_argument(
        "--executor", choices=["local", "ray"],
        help="where runs train: local child processes, or Ray jobs on a cluster (env GRPO_EXECUTOR; default local)",
    )
    serve.add_argument(
        "--ray-address", metavar="URL",
        help="the Ray cluster's job submission address, e.g. http://HEAD:8265 (env GRPO_RAY_ADDRESS)",
    )
    _add_boundary(serve)
    train = sub.add_parser(
        "train",
        help="train a run config headless (same worker, same store)",
        description="Train the run described by a YAML config (as written to each run folder), recording into the "
        "same store the dashboard reads. The worker starts as the dashboard starts it (accelerate launch for "
        "num_processes > 1); its log goes to the run folder's train.log and to this terminal. Ctrl-C stops the "
        "run at its next step, a second Ctrl-C kills it.",
    )
    _add_common(train)
    train.add_argument("config", help="run config YAML file")
    train.add_argument("--max-steps", type=int, help="override max_steps")
    sweep = sub.add_parser(
        "sweep",
        help="launch one run per point of a config's sweep: block and supervise them to the end",
        description="Queue one run per point of the grid in the config's `sweep:` block (e.g. `sweep: {learning_rate: "
        "[1e-5, 1e-4], beta: [0.0, 0.04]}`; all of them or none), then start and supervise them as the dashboard "
        "does, --max-concurrent-runs at a time, until every one has finished; print the sweep's table.",
    )
    _add_common(sweep)
    sweep.add_argument("config", help="run config YAML file with a sweep: block")
    sweep.add_argument("--max-steps", type=int, help="override max_steps of every run")
    _add_max_concurrent_runs(sweep)
    sweep.add_argument(
        "--queue-only", action="store_true",
        help="only queue the runs: a dashboard serving the same store starts them (with its executor and limits)",
    )
    preflight = sub.add_parser(
        "preflight",
        help="will this run learn? sample a few groups with its rules, no training",
        description="Sample a few prompts x num_generations completions from the config's model, score them with its "
        "reward rules and report how often rewards vary within a group (no training; see "
        "grpo_core/preflight/worker.py).",
    )
    add_preflight_arguments(preflight)
    add_auth_command(sub)  # auth add / remove: hashed entries of the auth file
    add_integration_commands(sub, _add_common)  # token, sync: runs recorded from scripts (docs/integrations.md)
    add_rescore_parser(sub, _add_common)  # the reward workbench, headless (app/cli/rescore.py)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``grpo-dashboard`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    from grpo_core.settings import load_settings

    if args.command == "serve":
        from grpo_core.access.auth_file import migrate_auth_file
        from grpo_core.access.logins import redact_url
        from grpo_core.settings import (
            auth_file_path,
            load_admins,
            load_auth,
            load_code_runners,
            load_ingest_max_runs,
        )

        try:
            auth_file = auth_file_path(args.auth_file)
            for warning in migrate_auth_file(auth_file) if auth_file else ():  # no plain-text password stays on disk
                print(f"WARNING: {warning}", file=sys.stderr, flush=True)
            settings = load_settings(
                data_dir=args.data_dir,
                db_url=args.db,
                host=args.host,
                port=args.port,
                max_concurrent_runs=args.max_concurrent_runs,
                max_upload_mb=args.max_upload_mb,
                webhook_url=args.webhook_url,
                webhook_allow_hosts=args.webhook_allow_host,
                run_webhooks=args.run_webhooks,
                executor=args.executor,
                ray_address=args.ray_address,
                shared_dir=args.shared_dir,
                plugin_dirs=args.plugin_dir,
                plugin_packages=args.plugin_package,
                dataset_roots=args.dataset_root,
                model_roots=args.model_root,
                allow_remote_code=args.allow_remote_code,
            ).with_overrides(auth=load_auth(args.auth, args.auth_file), admins=load_admins(args.auth_file),
                             code_runners=load_code_runners(args.auth_file), auth_file=auth_file,
                             ingest_max_runs=load_ingest_max_runs(args.ingest_max_runs))
        except ValueError as exc:
            print(f"grpo-dashboard serve: {exc}", file=sys.stderr)
            return 2
        from app.server import serve

        print(f"grpo-dashboard: data in {settings.data_dir}, store {redact_url(settings.db_url)}", flush=True)
        serve(settings, private_files=[args.auth_file or os.environ.get("GRPO_AUTH_FILE")])
        return 0
    if args.command == "auth":
        return run_auth_command(args)
    integration = run_integration_command(args)  # token, sync
    if integration is not None:
        return integration
    if args.command == "preflight":
        return _preflight(args)
    if args.command == "sweep":
        return _sweep(args)
    if args.command == "rescore":
        return run_rescore(args)
    return _train(args)


def _as_given(config: RunConfig, args: argparse.Namespace) -> RunConfig:
    """``config`` (a :class:`~grpo_core.run_config.RunConfig` read from ``args.config``) with ``--max-steps``
    applied, validated like the file's own value (0 is refused, not ignored), and its relative ``dataset_path`` or
    plugin file looked up from here, else from the YAML's folder
    (:func:`grpo_core.submit.queue.resolve_relative_paths`).

    Raises:
        grpo_core.run_config.ConfigError: ``--max-steps`` is not a valid ``max_steps``.
    """
    from grpo_core.submit.queue import resolve_relative_paths

    if args.max_steps is not None:
        config = parse_run_config(
            {**config.model_dump(mode="json"), "max_steps": args.max_steps}, source=f"{args.config} --max-steps"
        )
    return resolve_relative_paths(config, Path(args.config).resolve().parent)


def _preflight(args: argparse.Namespace) -> int:
    from grpo_core.preflight.worker import preflight_from_args

    return preflight_from_args(args, prog="grpo-dashboard preflight")


def _train(args: argparse.Namespace) -> int:
    from grpo_core.access.logins import redact_url
    from grpo_core.run_config import ConfigError, load_run_config
    from grpo_core.settings import load_settings
    from grpo_core.submit.queue import submit_run
    from grpo_core.training.headless import HeadlessRefusal, headless_gpus, train_headless
    from grpo_core.training.limits import apply_resource_limits
    from storage import RunStatus, Store

    try:  # the same limits as a worker the dashboard starts (GRPO_WORKER_MAX_MEMORY_MB, GRPO_WORKER_MAX_FILE_MB)
        limits = apply_resource_limits()
    except ValueError as exc:
        print(f"grpo-dashboard train: {exc}", file=sys.stderr)
        return 2
    if limits:
        print(f"grpo-dashboard train: worker limits: {', '.join(limits)}", flush=True)
    settings = load_settings(data_dir=args.data_dir, db_url=args.db, shared_dir=args.shared_dir)
    settings.ensure_dirs()
    store = Store(settings.db_url)
    try:
        config = _as_given(load_run_config(args.config), args)
        gpus = headless_gpus(store, config.model_dump(mode="json"))
        submitted = submit_run(store, config, model_cache_dir=settings.model_cache_dir)
    except (ConfigError, HeadlessRefusal) as exc:
        sweep_file = "sweep: Extra inputs" in str(exc)
        hint = "; a config with a sweep: block runs with `grpo-dashboard sweep`" if sweep_file else ""
        print(f"grpo-dashboard train: {exc}{hint}", file=sys.stderr)
        store.close()
        return 2
    run = submitted.run
    how = f"{config.num_processes} processes (accelerate launch)" if config.num_processes > 1 else "one process"
    where = f", GPUs {','.join(gpus)}" if gpus else ""
    print(f"grpo-dashboard train: run #{run.id} {run.name} (store {redact_url(settings.db_url)}), {how}{where}",
          flush=True)
    for warning in submitted.warnings:
        print(f"grpo-dashboard train: warning: {warning}", flush=True)
    # The worker is started as the dashboard's launcher starts it; its train.log is copied here as it grows.
    status = train_headless(store, settings, run, gpus, echo=sys.stdout)
    final = store.get_run(run.id)
    if not status.is_final:  # a dashboard serving this store claimed the queued run first: it trains there
        print(f"grpo-dashboard train: run #{run.id} was started by a dashboard serving this store; follow it there",
              flush=True)
        store.close()
        return 0
    print(f"grpo-dashboard train: run #{run.id} {status.value}", flush=True)
    if final.error:
        print(final.error, file=sys.stderr)
    store.close()
    return 0 if status != RunStatus.FAILED else 1


def _sweep(args: argparse.Namespace) -> int:
    import signal
    import threading
    import time

    from grpo_core.access.logins import redact_url
    from grpo_core.run_config import ConfigError
    from grpo_core.settings import load_settings
    from grpo_core.submit.sweeps import (
        REWARD_KEY,
        failure_lines,
        parse_sweep_config_text,
        runs_word,
        submit_sweep,
        sweep_table,
    )
    from grpo_core.training.launcher import Launcher
    from storage import RunStatus, Store

    try:
        settings = load_settings(data_dir=args.data_dir, db_url=args.db, max_concurrent_runs=args.max_concurrent_runs)
    except ValueError as exc:
        print(f"grpo-dashboard sweep: {exc}", file=sys.stderr)
        return 2
    settings.ensure_dirs()
    store = Store(settings.db_url)
    try:
        try:
            text = Path(args.config).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{args.config}: cannot read ({exc.strerror})") from None
        base, grid = parse_sweep_config_text(text, source=args.config)
        if args.max_steps is not None and "max_steps" in grid:
            raise ConfigError(f"{args.config} --max-steps: the sweep varies max_steps itself")
        base = _as_given(base, args)
        launched = submit_sweep(store, base, grid, model_cache_dir=settings.model_cache_dir)
    except ConfigError as exc:
        print(f"grpo-dashboard sweep: {exc}", file=sys.stderr)
        return 2
    sweep = launched.sweep
    print(f"grpo-dashboard sweep: sweep {sweep.id} {sweep.name}: {runs_word(len(launched.runs))} queued "
          f"(#{launched.runs[0].id}-#{launched.runs[-1].id}, tag sweep:{sweep.id}; store "
          f"{redact_url(settings.db_url)})", flush=True)
    for warning in launched.warnings:
        print(f"grpo-dashboard sweep: warning: {warning}", flush=True)
    if args.queue_only:
        return 0
    launcher = Launcher(store, settings)
    run_ids = [run.id for run in launched.runs]

    def on_sigterm(*_):
        raise KeyboardInterrupt

    in_main_thread = threading.current_thread() is threading.main_thread()  # only there can a handler be set
    previous = signal.signal(signal.SIGTERM, on_sigterm) if in_main_thread else None
    try:
        try:
            while not launcher.wait_idle(timeout_s=60, run_ids=run_ids):
                pass
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: cancel the sweep's runs (each saves a checkpoint) and wait
            print("grpo-dashboard sweep: interrupted; cancelling the sweep's runs (interrupt again to stop them by "
                  "force)", file=sys.stderr, flush=True)
            for run_id in run_ids:
                launcher.cancel(run_id)
            deadline = time.monotonic() + settings.cancel_grace_s + 30
            try:
                while not launcher.wait_idle(timeout_s=5, run_ids=run_ids) and time.monotonic() < deadline:
                    pass
            except KeyboardInterrupt:  # again: stop the workers now, as the launcher does after the grace period
                for run in store.list_runs([RunStatus.RUNNING, RunStatus.QUEUED]):
                    if run.id in run_ids:
                        launcher.stop_now(run)
                print("grpo-dashboard sweep: stopped by force", file=sys.stderr, flush=True)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
    runs = store.sweep_runs(sweep.id)
    headers, rows = sweep_table(sweep, runs, store.final_and_best(run_ids, REWARD_KEY))
    print("\t".join(headers))
    for row in rows:
        print("\t".join("" if value is None else str(value) for value in row))
    for line in failure_lines(runs):
        print(line, file=sys.stderr)
    store.close()
    return 0 if all(run.status.value == "completed" for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
