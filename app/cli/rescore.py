"""``grpo-dashboard rescore RUN RULES.yaml``: re-score a run's recorded groups with the composition in ``RULES.yaml``
headless, print the comparison (a table, or ``--json``: the public API's ``rescore_run`` answer, the same numbers),
and store it as a rescoring beside the run. Added to :mod:`app.cli.main` by :func:`add_rescore_parser`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_rescore_parser(sub, add_common) -> None:
    """Add the ``rescore`` sub-command to ``sub`` (``add_common`` adds ``--data-dir``/``--db``/``--shared-dir``)."""
    rescore = sub.add_parser(
        "rescore",
        help="re-score a run's recorded groups with other reward rules and compare (the reward workbench, headless)",
        description="Score the completions a run recorded with the reward rules of RULES (YAML: a list of rules, a "
        "run config or a preset) and print, per step, the mean reward and the share of groups without signal under "
        "both, and the groups whose advantages change sign. The run's records are not changed.",
    )
    add_common(rescore)
    rescore.add_argument("run", type=int, help="the run's id")
    rescore.add_argument("rules", help="YAML file of the reward rules")
    rescore.add_argument("--first-step", type=int)
    rescore.add_argument("--last-step", type=int)
    rescore.add_argument("--sample", type=int, help="score at most this many groups, drawn at random")
    rescore.add_argument("--seed", type=int, default=0)
    rescore.add_argument("--scale-rewards", choices=["group", "batch", "none"], help="default: the run's")
    rescore.add_argument("--json", action="store_true", help="print the comparison as JSON (as the API returns it)")


def run_rescore(args: argparse.Namespace) -> int:
    """Run the ``rescore`` sub-command; 0 on success, 2 for a refused request, 1 when the rescoring failed."""
    from grpo_core.rescore.job import rescore_run
    from grpo_core.rescore.request import RescoreError, parse_request, parse_rules_text
    from grpo_core.settings import load_settings
    from storage import Store

    prog = "grpo-dashboard rescore"
    try:
        settings = load_settings(data_dir=args.data_dir, db_url=args.db, shared_dir=args.shared_dir)
        text = Path(args.rules).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    settings.ensure_dirs()
    store = Store(settings.db_url)
    try:
        request = parse_request({"run_id": args.run, "rewards": parse_rules_text(text, source=args.rules),
                                 "first_step": args.first_step, "last_step": args.last_step, "sample": args.sample,
                                 "seed": args.seed, "scale_rewards": args.scale_rewards})
        result = rescore_run(store, request, workdir=settings.data_dir / "rescorings")
    except RescoreError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1 if str(exc).startswith("rescoring ") else 2
    finally:
        store.close()
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print_table(result)
    return 0


def _f(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def print_table(result: dict) -> None:
    """The comparison as tab-separated lines: per step, then the summary and the groups that change sign."""
    print("\t".join(["step", "groups", "reward_run", "reward_new", "frac_reward_zero_std_run",
                     "frac_reward_zero_std_new"]))
    for s in result["steps"]:
        print("\t".join([str(s["step"]), str(s["groups"]), _f(s["reward_before"]), _f(s["reward_after"]),
                         _f(s["frac_reward_zero_std_before"]), _f(s["frac_reward_zero_std_after"])]))
    summary = result["summary"]
    print(f"all\t{result['num_groups']}\t{_f(summary['reward_before'])}\t{_f(summary['reward_after'])}\t"
          f"{_f(summary['frac_reward_zero_std_before'])}\t{_f(summary['frac_reward_zero_std_after'])}")
    print(f"rescoring {result['rescoring_id']}: {summary['groups_changed']} groups change, "
          f"{summary['sign_changes']} advantages change sign")
    for group in result["changed_groups"][:10]:
        print(f"  step {group['step']} row {group['row_index']} (group {group['group_id']}): "
              f"{group['sign_changes']} sign changes, moved {group['max_shift']:.3f}")
    for probe in result.get("probe") or []:
        paid = ", ".join(str(n) for n in probe.get("paid_by") or ()) or probe["rule"]
        print(f"  hacking probe: {probe['probe']} scores {_f(probe['total'])} (paid by {paid})")
