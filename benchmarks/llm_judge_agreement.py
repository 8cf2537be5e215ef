"""The LLM judge's agreement with the labelled set of judgements (tests/fixtures/llm_judge).

    python benchmarks/llm_judge_agreement.py [--code DIR] [--json out.json]

Starts the fake model in its own process (tests/audit/fake_openai_server.py: the OpenAI chat
API over HTTP, answering each judgement with the realistic raw answers of the fixture), runs
every labelled judgement through `audit.judge_llm.judge_dimension` with the executable
evidence the fixture records, and prints the agreement with the labels (the hard-reject
class and whether the dimension is found broken), then every disagreement. `--code DIR`
measures the judge of another checkout (e.g. an older commit exported with `git archive`):
its packages are imported first, the fixture and the fake stay this tree's.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, help="measure the judge of this checkout")
    ap.add_argument("--json", type=Path, help="also write the outcomes here")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))  # its audit/, tasks/, ... first
    from audit import judge_llm
    from tests.audit.llm_agreement import agreement, fake_model, judge_all, labelled, script_of

    doc = labelled()
    with fake_model() as model:
        model.set_script(script_of(doc))
        outcomes = judge_all(model.config(), doc)
        requests = len(model.requests())
    got = agreement(outcomes)
    where = args.code or ROOT
    print(f"judge: {where} (prompt {judge_llm.PROMPT_VERSION}); {requests} requests")
    print()
    print(
        "| judgements | agree | hard reject agrees | broken agrees | false hard rejects "
        "| missed hard rejects | undecided |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {got.n} | {got.agree} ({got.rate:.1%}) | {got.hard_agree} | {got.broken_agree} "
        f"| {got.false_hard} | {got.missed_hard} | {got.undecided} |"
    )
    notes = {j["id"]: j["note"] for j in doc["judgements"]}
    wrong = [o for o in outcomes if not o.agrees]
    if wrong:
        print()
        print("| judgement | label | judge | status | note |")
        print("|---|---|---|---|---|")
        for o in wrong:
            label = f"{o.label_hard or '-'}, {'broken' if o.label_broken else 'sound'}"
            state = "no score" if o.broken is None else ("broken" if o.broken else "sound")
            print(
                f"| {o.id} | {label} | {o.hard or '-'}, {state} | {o.status} "
                f"| {notes.get(o.id, '')} |"
            )
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")


if __name__ == "__main__":
    main()
