#!/bin/bash
# Fix the 2PC coordinator: collect a vote from EVERY participant (in parallel, with a
# real timeout; a timeout or missing reply counts as NO), commit only on unanimous YES,
# otherwise abort everywhere.  Add the --test-scenario entry point run_tests.sh drives.
set -e
cd /opt/coordinator
cp transaction_manager.py /tmp/transaction_manager.py.orig
python3 - <<'PY'
path = "/opt/coordinator/transaction_manager.py"
src = open(path).read()
head = src[: src.index("class TransactionCoordinator")]
head = head.replace("import time\n", "import sys\nimport time\nimport argparse\nfrom concurrent.futures import ThreadPoolExecutor, wait\n", 1)
coordinator = r'''class TransactionCoordinator:
    """Two-phase commit coordinator"""

    def __init__(self, participants: List[Participant], timeout: float = 1.5):
        self.participants = participants
        self.timeout = timeout
        self.transaction_log = {}

    def execute_transaction(self, transaction_id: str, operation: Dict) -> bool:
        """Execute a distributed transaction using 2PC"""
        logger.info(f"Starting transaction {transaction_id} with operation: {operation}")
        self.transaction_log[transaction_id] = "PREPARING"

        # Phase 1: Prepare
        prepare_result = self.prepare_phase(transaction_id, operation)

        # Phase 2: Commit only on a unanimous YES; otherwise abort everywhere
        if prepare_result:
            return self.commit_phase(transaction_id)
        return self.abort_all(transaction_id)

    def prepare_phase(self, transaction_id: str, operation: Dict) -> bool:
        """Phase 1: Send PREPARE to all participants and collect ALL votes.

        Every participant gets the PREPARE (no early exit), each reply is awaited for
        at most self.timeout seconds, and a timeout, an exception or a None reply
        counts as a NO vote.
        """
        logger.info(f"PREPARE phase for transaction {transaction_id}")
        votes: Dict[str, Optional[bool]] = {}
        pool = ThreadPoolExecutor(max_workers=max(1, len(self.participants)))
        try:
            futures = {pool.submit(p.prepare, transaction_id, operation): p for p in self.participants}
            done, not_done = wait(futures, timeout=self.timeout)
            for fut, participant in futures.items():
                if fut in not_done:
                    logger.warning(f"Participant {participant.name} did not answer PREPARE within {self.timeout}s (timeout -> NO)")
                    votes[participant.name] = None
                    continue
                try:
                    vote = fut.result()
                except Exception as exc:  # a failing participant votes NO
                    logger.error(f"Participant {participant.name} failed during PREPARE: {exc}")
                    vote = None
                if vote is None:
                    logger.warning(f"Participant {participant.name} gave no vote (timeout -> NO)")
                votes[participant.name] = vote
        finally:
            pool.shutdown(wait=False)

        all_yes = len(votes) == len(self.participants) and all(v is True for v in votes.values())
        logger.info(f"Prepare phase results: {votes}, all_yes={all_yes}")
        return all_yes

    def commit_phase(self, transaction_id: str) -> bool:
        """Phase 2: Send COMMIT to all participants (only reached after unanimous YES)"""
        logger.info(f"COMMIT phase for transaction {transaction_id}")
        self.transaction_log[transaction_id] = "COMMITTED"  # decision is logged first
        for participant in self.participants:
            participant.commit(transaction_id)
        logger.info(f"Transaction {transaction_id} COMMITTED")
        return True

    def abort_all(self, transaction_id: str) -> bool:
        """Send ABORT to every participant, whether or not it voted"""
        logger.info(f"ABORT phase for transaction {transaction_id}")
        self.transaction_log[transaction_id] = "ABORTED"
        for participant in self.participants:
            participant.abort(transaction_id)
        logger.info(f"Transaction {transaction_id} ABORTED")
        return False


SCENARIOS = {
    # name: ([(name, prepare_response, response_delay)], expected final state)
    "all_agree": ([("DB1", True, 0.0), ("DB2", True, 0.0), ("DB3", True, 0.0)], "COMMITTED"),
    "one_no": ([("DB1", True, 0.0), ("DB2", False, 0.0), ("DB3", True, 0.0)], "ABORTED"),
    "timeout": ([("DB1", True, 0.0), ("DB2", True, 2.0), ("DB3", True, 0.0)], "ABORTED"),
    "multiple_no": ([("DB1", False, 0.0), ("DB2", True, 0.0), ("DB3", False, 0.0)], "ABORTED"),
    "mixed": ([("DB1", True, 2.0), ("DB2", False, 0.0), ("DB3", True, 0.0)], "ABORTED"),
}


def run_scenario(name: str) -> int:
    specs, expected = SCENARIOS[name]
    participants = [Participant(n, prepare_response=r, response_delay=d) for n, r, d in specs]
    coordinator = TransactionCoordinator(participants)
    operation = {'action': 'reserve', 'item': 'ABC', 'quantity': 5}
    result = coordinator.execute_transaction(f"txn_{name}", operation)
    states = {p.name: p.state for p in participants}
    outcome = "COMMITTED" if result else "ABORTED"
    print(f"Scenario {name}: transaction {outcome}")
    print(f"Participant states: {states}")
    consistent = len(set(states.values())) == 1 and next(iter(states.values())) == outcome
    if consistent and outcome == expected:
        print(f"Result: consistent - all participants {outcome}")
        return 0
    print(f"Result: INCONSISTENT (expected all {expected}, got {states})")
    return 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="2PC transaction coordinator")
    parser.add_argument("--test-scenario", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    if args.test_scenario:
        sys.stdout.flush()
        code = run_scenario(args.test_scenario)
        sys.stdout.flush()
        sys.exit(code)

    participants = [
        Participant("DB1", prepare_response=True),
        Participant("DB2", prepare_response=True),
        Participant("DB3", prepare_response=True)
    ]
    coordinator = TransactionCoordinator(participants)
    operation = {'action': 'reserve', 'item': 'ABC', 'quantity': 5}
    result = coordinator.execute_transaction("txn_001", operation)
    print(f"\nTransaction result: {result}")
    print(f"Participant states: {[(p.name, p.state) for p in participants]}")
'''
open(path, "w").write(head + coordinator)
PY

# Run the harness and record what it reported.
set +e
bash /opt/coordinator/run_tests.sh | tee /tmp/run_tests.out
rc=${PIPESTATUS[0]}
total=$(sed -n 's/^Total tests run: //p' /tmp/run_tests.out)
passed=$(sed -n 's/^Tests passed: //p' /tmp/run_tests.out)
if [ "$rc" -eq 0 ] && [ "$passed" = "$total" ]; then ok=true; else ok=false; fi
printf 'fixed_file=/opt/coordinator/transaction_manager.py\ntests_passed=%s\ntotal_tests=%s\n' "$ok" "$total" > /tmp/solution.txt
cat /tmp/solution.txt
