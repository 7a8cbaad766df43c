"""``grpo-dashboard token`` and ``grpo-dashboard sync``: API tokens for scripts that record over HTTP, and sending a
spool a script left behind (see :mod:`grpo_core.integrations` and docs/integrations.md).

* ``token create --login L [--name N]`` prints a new token of login ``L`` once (only its hash is stored);
  ``token list [--login L]``; ``token revoke ID``. They work on the store directly (``--data-dir`` / ``--db``), as
  the dashboard's admin does.
* ``sync DIR [--token T]`` sends a spool folder (or every spool under ``DIR``, e.g. ``<output_dir>/dashboard-spool``)
  to the dashboard it was recorded for, each record once; a spool already sent is left as it is.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def add_integration_commands(sub, add_common) -> None:
    """Add the ``token`` and ``sync`` sub-commands to ``grpo-dashboard``'s sub-parsers."""
    token = sub.add_parser("token", help="create, list or revoke the API tokens scripts record runs with",
                           description="API tokens for DashboardCallback over HTTP (docs/integrations.md).")
    actions = token.add_subparsers(dest="token_action", required=True)
    create = actions.add_parser("create", help="create a token (printed once)")
    create.add_argument("--login", required=True, help="the login the token's runs belong to")
    create.add_argument("--name", default="script", help="what the token is for (e.g. the cluster's name)")
    listing = actions.add_parser("list", help="list tokens (never their values)")
    listing.add_argument("--login", help="only this login's")
    revoke = actions.add_parser("revoke", help="revoke a token: it authenticates nothing from now on")
    revoke.add_argument("token_id", type=int)
    for parser in (create, listing, revoke):
        add_common(parser)
    sync = sub.add_parser("sync", help="send a spool a script left (the dashboard was down when it ended)",
                          description="Send spool folders of DashboardCallback to their dashboard, each record once.")
    sync.add_argument("folder", metavar="DIR", help="a spool folder, or a folder of them")
    sync.add_argument("--token", help="the API token (default $GRPO_DASHBOARD_TOKEN)")


def run_integration_command(args: argparse.Namespace) -> int | None:
    """Run ``token`` or ``sync``; ``None`` for another command."""
    if args.command == "token":
        return _token(args)
    if args.command == "sync":
        return _sync(args)
    return None


def _token(args: argparse.Namespace) -> int:
    from grpo_core.settings import load_settings
    from storage import Store, StoreError

    settings = load_settings(data_dir=args.data_dir, db_url=args.db, shared_dir=args.shared_dir)
    settings.ensure_dirs()
    store = Store(settings.db_url)
    try:
        if args.token_action == "create":
            info, plain = store.create_api_token(args.login, args.name)
            print(f"token {info.id} for {info.login} ({info.name}); shown once, keep it secret:\n{plain}")
        elif args.token_action == "list":
            for info in store.list_api_tokens(args.login):
                state = f"revoked {info.revoked_at:%Y-%m-%d %H:%M}" if info.revoked_at else "active"
                used = f", last used {info.last_used_at:%Y-%m-%d %H:%M}" if info.last_used_at else ""
                print(f"{info.id}\t{info.login}\t{info.name}\t{state}{used}")
        else:
            info = store.revoke_api_token(args.token_id)
            print(f"token {info.id} of {info.login} ({info.name}) revoked")
    except StoreError as exc:
        print(f"grpo-dashboard token: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    return 0


def _sync(args: argparse.Namespace) -> int:
    from grpo_core.integrations.sender import DashboardClient, DashboardError, SpoolSender
    from grpo_core.integrations.spool import META_FILE, Spool, SpoolError

    token = args.token or os.environ.get("GRPO_DASHBOARD_TOKEN")
    if not token:
        print("grpo-dashboard sync: an API token is needed: --token or $GRPO_DASHBOARD_TOKEN", file=sys.stderr)
        return 2
    root = Path(args.folder)
    folders = [root] if (root / META_FILE).is_file() else sorted(p.parent for p in root.glob(f"*/{META_FILE}"))
    if not folders:
        print(f"grpo-dashboard sync: no spool in {root}", file=sys.stderr)
        return 2
    failed = 0
    for folder in folders:
        try:
            spool = Spool.open(folder)
            if spool.finished and spool.run_id is not None:
                print(f"{folder}: sent already (run {spool.run_id})")
                continue
            sender = SpoolSender(spool, DashboardClient(spool.url, token))
            before = spool.acked
            while not sender.send_once():
                pass
            print(f"{folder}: sent records {before + 1}..{spool.last_seq} to run {spool.run_id} at {spool.url}")
        except (SpoolError, DashboardError) as exc:
            print(f"{folder}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0
