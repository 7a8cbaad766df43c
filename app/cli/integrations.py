"""``grpo-dashboard token`` and ``grpo-dashboard sync``: API tokens for scripts that record over HTTP, and sending a
spool a script left behind (see :mod:`grpo_core.integrations` and docs/integrations.md).

* ``token create --login L [--name N] [--expires-in 90d]`` prints a new token of login ``L`` once (only its hash is
  stored); ``token list [--login L]`` (state, expiry, last use); ``token revoke ID``. They work on the store directly (``--data-dir`` / ``--db``), as
  the dashboard's admin does.
* ``sync DIR [--url URL] [--token T]`` sends a spool folder (or every spool under ``DIR``, e.g.
  ``<output_dir>/dashboard-spool``), each record once; a spool already sent is left as it is. The token goes only to
  ``--url`` (else ``$GRPO_DASHBOARD_URL``) or, without one, to the URL the spool was recorded for when its
  ``meta.json`` proves it was written with this token (:func:`grpo_core.integrations.sender.url_binding`): a
  ``meta.json`` naming another server is refused, never sent to, and so is a redirect to another origin.
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
    create.add_argument("--expires-in", metavar="DURATION",
                        help="the token stops working after DURATION: 30d, 12h, 90m, 2w or seconds (default: never)")
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
    sync.add_argument("--url", help="the dashboard to send to (default $GRPO_DASHBOARD_URL, else the URL the spool was "
                      "recorded for with this token); a spool's meta.json naming another is never sent to")


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
    from storage.api_tokens import parse_expiry

    settings = load_settings(data_dir=args.data_dir, db_url=args.db, shared_dir=args.shared_dir)
    settings.ensure_dirs()
    store = Store(settings.db_url)
    try:
        if args.token_action == "create":
            info, plain = store.create_api_token(args.login, args.name, expires_in_s=parse_expiry(args.expires_in))
            until = f", {info.state}" if info.expires_at else ""
            print(f"token {info.id} for {info.login} ({info.name}{until}); shown once, keep it secret:\n{plain}")
        elif args.token_action == "list":
            for info in store.list_api_tokens(args.login):
                used = f"last used {info.last_used_at:%Y-%m-%d %H:%M}" if info.last_used_at else "never used"
                print(f"{info.id}\t{info.login}\t{info.name}\t{info.state}\t{used}")
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
    from grpo_core.integrations.sender import DashboardClient, DashboardError, SpoolSender, same_origin, url_binding
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
    given = args.url or os.environ.get("GRPO_DASHBOARD_URL") or None
    failed = 0
    for folder in folders:
        try:
            spool = Spool.open(folder)
            if spool.finished and spool.run_id is not None:
                print(f"{folder}: sent already (run {spool.run_id})")
                continue
            url = _sync_target(spool, token, given, same_origin, url_binding)
            sender = SpoolSender(spool, DashboardClient(url, token))
            before = spool.acked
            while not sender.send_once():
                pass
            print(f"{folder}: sent records {before + 1}..{spool.last_seq} to run {spool.run_id} at {url}")
        except (SpoolError, DashboardError, ValueError) as exc:
            print(f"{folder}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _sync_target(spool, token: str, given: str | None, same_origin, url_binding) -> str:
    """Where ``sync`` sends ``spool`` with ``token``: ``given`` (``--url``), else the spool's URL when its
    ``url_binding`` was made with this token.

    Raises:
        ValueError: no ``--url`` and the spool's URL is not bound to the token (the message says to pass one).
    """
    import hmac

    recorded = str(spool.url)
    if given:
        if recorded and not same_origin(given, recorded):
            print(f"{spool.folder}: its meta.json names {recorded[:200]}; sending to --url {given} as given",
                  file=sys.stderr)
        return given
    if spool.url_binding and hmac.compare_digest(spool.url_binding, url_binding(recorded, token)):
        return recorded
    raise ValueError(f"its meta.json names {recorded[:200]!r}, which was not recorded with this token; the token is "
                     "not sent there. Give the dashboard's URL: --url URL")
