#!/bin/bash
set -e
cd /workspace

# 1) The shipped etcd_client.py is corrupted: a markdown fence and a pasted
#    second module follow the EtcdClient class, so it cannot even be imported.
#    Keep only the client code, and add the lease-expiration simulation hook
#    (expire_all_leases) that the instruction says the client provides.
python3 - <<'PY'
import re
path = '/workspace/etcd_client.py'
src = open(path).read()
lines = src.splitlines()
keep = []
for line in lines:
    if line.strip().startswith('```'):
        break
    keep.append(line)
src = '\n'.join(keep).rstrip() + '\n'
if 'def expire_all_leases' not in src:
    src += '''
    def expire_all_leases(self):
        """Testing helper: force every lease to expire now (keys bound to them are removed)."""
        with self.lock:
            for lease in self.leases.values():
                lease['last_keepalive'] = 0.0
            self._expire_leases()

    def create_lease(self, ttl: int) -> int:
        """Alias of grant_lease."""
        return self.grant_lease(ttl)
'''
compile(src, path, 'exec')
open(path, 'w').write(src)
PY

# 2) The corrected leader elector.
cat > /workspace/fixed_leader_election.py <<'EOF'
import threading
import time
import uuid
from typing import Optional


class LeaderElector:
    """Leader election on top of etcd leases and compare-and-swap transactions.

    * The leader key is created atomically (txn: create_revision == 0) and is
      bound to a lease, so only one instance can ever hold it.
    * The lease is renewed by a background keep-alive thread; if renewal fails
      leadership is dropped.
    * Leadership status is always verified against etcd, so lease expiry or a
      takeover is noticed immediately.
    * Resigning deletes the key only if we still own it and revokes the lease.
    """

    def __init__(self, etcd_client, instance_id=None, lease_ttl=10,
                 election_key='/election/leader'):
        self.etcd_client = etcd_client
        self.instance_id = instance_id if instance_id is not None else str(uuid.uuid4())
        self.lease_ttl = lease_ttl
        self.leader_key = election_key
        self.lease_id: Optional[int] = None
        self._leader = False
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._keepalive_thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------------ election
    def try_become_leader(self) -> bool:
        with self._lock:
            if self._leader and self._verify_ownership():
                return True
            self._drop_leadership()

            lease_id = self.etcd_client.grant_lease(self.lease_ttl)
            if lease_id is None:
                return False
            ok, results = self.etcd_client.transaction(
                [(self.leader_key, 'create', 0)],
                [('put', self.leader_key, self.instance_id, lease_id)],
                [],
            )
            if ok and results and all(results):
                self.lease_id = lease_id
                self._leader = True
                self._start_keepalive()
                return True
            # Lost the race: release the unused lease.
            try:
                self.etcd_client.revoke_lease(lease_id)
            except Exception:
                pass
            return False

    # drop-in names of the original implementation
    def attempt_election(self) -> bool:
        return self.try_become_leader()

    # ------------------------------------------------------------------ status
    def is_leader(self) -> bool:
        with self._lock:
            if not self._leader:
                return False
            if self._verify_ownership():
                return True
            self._drop_leadership()
            return False

    def is_leader_active(self) -> bool:
        return self.is_leader()

    def get_current_leader(self) -> Optional[str]:
        return self.etcd_client.get(self.leader_key)

    # ------------------------------------------------------------------ resign
    def resign(self) -> bool:
        with self._lock:
            if not self._leader:
                return False
            try:
                # delete the key only if we still own it
                self.etcd_client.transaction(
                    [(self.leader_key, 'value', self.instance_id)],
                    [('delete', self.leader_key)],
                    [],
                )
            finally:
                self._drop_leadership()
            return True

    # ------------------------------------------------------------------ renewal
    def renew_leadership(self) -> bool:
        with self._lock:
            if not self._leader or self.lease_id is None:
                return False
            if not self._verify_ownership():
                self._drop_leadership()
                return False
            if not self.etcd_client.keep_alive(self.lease_id):
                self._drop_leadership()
                return False
            return True

    def _start_keepalive(self):
        self._stop = threading.Event()
        stop = self._stop
        lease_id = self.lease_id
        interval = max(self.lease_ttl / 3.0, 0.05)

        def loop():
            while not stop.wait(interval):
                with self._lock:
                    if stop.is_set() or not self._leader or self.lease_id != lease_id:
                        return
                    if not self.renew_leadership():
                        return

        t = threading.Thread(target=loop, daemon=True)
        self._keepalive_thread = t
        t.start()

    # ------------------------------------------------------------------ helpers
    def _verify_ownership(self) -> bool:
        return self.etcd_client.get(self.leader_key) == self.instance_id

    def _drop_leadership(self):
        self._leader = False
        self._stop.set()
        lease_id, self.lease_id = self.lease_id, None
        if lease_id is not None:
            try:
                self.etcd_client.revoke_lease(lease_id)
            except Exception:
                pass

    def __del__(self):
        try:
            self._stop.set()
        except Exception:
            pass
EOF

python3 -c "import sys; sys.path.insert(0,'/workspace'); from fixed_leader_election import LeaderElector; from etcd_client import EtcdClient; print('ok')"
