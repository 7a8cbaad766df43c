"""``grpo-dashboard auth``: write the auth file's entries with hashed passwords (docs/configuration.md).

* ``auth add USER [--admin] [--run-code] [--auth-file FILE]``: the password is read from the terminal (asked twice,
  not echoed) or, when standard input is not a terminal, from its first line; never from the command line, where
  other accounts of the machine could read it. An existing line of ``USER`` is replaced (its marks too).
* ``auth remove USER``: a served dashboard notices at once; the login's sessions and API tokens stop working.

The file is ``--auth-file``, else ``$GRPO_AUTH_FILE``; it is written atomically, readable by its owner only
(:mod:`grpo_core.access.auth_file`).
"""

from __future__ import annotations

import argparse
import getpass
import sys


def add_auth_command(sub) -> None:
    """Add ``auth add`` and ``auth remove`` to ``grpo-dashboard``'s sub-parsers."""
    auth = sub.add_parser("auth", help="add or remove a login of the auth file (passwords stored hashed)",
                          description="Write the auth file's entries; passwords are stored as salted scrypt hashes.")
    actions = auth.add_subparsers(dest="auth_action", required=True)
    add = actions.add_parser("add", help="add a login, or set its password and marks",
                             description="Add USER to the auth file (or replace its line). The password is asked on "
                             "the terminal, or read from the first line of standard input.")
    add.add_argument("user")
    add.add_argument("--admin", action="store_true", help="mark the login [admin]: it may change anyone's runs")
    add.add_argument("--run-code", action="store_true",
                     help="mark the login [run-code]: it may run code of its own choosing on the server")
    remove = actions.add_parser("remove", help="remove a login (its sessions and API tokens stop at once)")
    remove.add_argument("user")
    for parser in (add, remove):
        parser.add_argument("--auth-file", metavar="FILE", help="the auth file (env GRPO_AUTH_FILE)")


def _read_password(stdin=None) -> str:
    stdin = stdin or sys.stdin
    if stdin.isatty():
        first = getpass.getpass("password: ")
        if getpass.getpass("again: ") != first:
            raise ValueError("the two passwords differ")
        return first
    return stdin.readline().rstrip("\r\n")


def run_auth_command(args: argparse.Namespace) -> int:
    """Run ``auth add`` or ``auth remove``; returns the exit status."""
    from grpo_core.access.auth_file import add_login, remove_login
    from grpo_core.access.logins import AccessError
    from grpo_core.settings import auth_file_path

    path = auth_file_path(args.auth_file)
    if path is None:
        print("grpo-dashboard auth: name the auth file: --auth-file FILE or $GRPO_AUTH_FILE", file=sys.stderr)
        return 2
    try:
        if args.auth_action == "add":
            new = add_login(path, args.user, _read_password(), admin=args.admin, run_code=args.run_code)
            print(f"{'added' if new else 'updated'} {args.user} in {path} (password stored as a salted hash)")
        elif remove_login(path, args.user):
            print(f"removed {args.user} from {path}")
        else:
            print(f"grpo-dashboard auth: {args.user} is not in {path}", file=sys.stderr)
            return 1
    except (AccessError, ValueError) as exc:
        print(f"grpo-dashboard auth: {exc}", file=sys.stderr)
        return 2
    return 0
