"""`memhub policy apply|sign|show`: seed 000 policies from the shell (GitOps: CI signs, a person applies).

`apply` goes through the same service as `pce.memory.policy.apply`, as a human principal
(`via="cli"`), with the same checks: admin role, signature when MEMHUB_PCE_POLICY_HMAC_KEY is
set, expected version. `sign` prints the signature of a file for an approver with that key.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from memhub.cli.container import Container
from memhub.core.errors import invalid
from memhub.services.pce import models as m
from memhub.services.pce import policies
from memhub.services.pce.config import PceConfig


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    policy = commands.add_parser("policy", help="apply, sign or show pce policies (seed 000)")
    policy.add_argument("action", choices=["apply", "sign", "show"])
    policy.add_argument("path", nargs="?", help="policy YAML file (apply, sign); a version (show)")
    policy.add_argument("--dry-run", action="store_true", help="run every check, store nothing")
    policy.add_argument("--validate-only", action="store_true", help="check the YAML only")
    policy.add_argument("--expected-version", help="apply only over this version")
    policy.add_argument("--approver", help="who approved it (required when signing is on)")
    policy.add_argument(
        "--signature",
        help="hex HMAC-SHA256 of approver, the version in force and the yaml (newline-separated)",
    )


async def run(container: Container, args: argparse.Namespace) -> int:
    runtime = container.runtime
    if args.action == "show":
        print(await policies.read_resource(runtime, container.principal, args.path or "current"))
        return 0
    if not args.path:
        raise invalid(f"policy {args.action} needs a YAML file")
    text = Path(args.path).read_text(encoding="utf-8")
    if args.action == "sign":
        key = PceConfig.from_settings(container.settings).policy_hmac_key
        if not key or not args.approver:
            raise invalid("policy sign needs MEMHUB_PCE_POLICY_HMAC_KEY and --approver")
        print(policies.sign(key, args.approver, text, await policies.version_in_force(runtime)))
        return 0
    request = m.PolicyInput.model_validate(
        {
            "yaml": text,
            "dry_run": args.dry_run,
            "validate_only": args.validate_only,
            "expected_version": args.expected_version,
            "approver": args.approver,
            "signature": args.signature,
        }
    )
    call = container.call("pce", replace(container.principal, via="cli"), "cli.policy.apply")
    result = await policies.apply(call, request)
    applied = not (args.dry_run or args.validate_only)
    print(json.dumps({"version": result.data.version, "applied": applied, "in_force": result.policy_version}))
    if not applied:
        print("nothing was stored", file=sys.stderr)
    return 0
