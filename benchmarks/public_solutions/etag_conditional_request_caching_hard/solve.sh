#!/bin/bash
# Rewrite app.py with proper HTTP ETag handling (strong, quoted ETags hashed from the
# resource's JSON; If-None-Match with lists/"*"/weak tags -> 304 on GET; If-Match with
# lists/"*" -> 412 on PUT when stale), replace the garbled test_client.py with a working
# 6-scenario HTTP client (it restores product 1 after its PUT test), start the API and run
# the client, which writes /home/api/test_results.txt.
set -e
cd /home/api/product_service

cat > app.py <<'PY'
#!/usr/bin/env python3
"""Product API with ETag / conditional request support."""
import hashlib
import json
import os
import sqlite3

from flask import Flask, jsonify, make_response, request

app = Flask(__name__)
DATABASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "database.db")


def get_db_connection():
    conn = sqlite3.connect(DATABASE)
    conn.row_factory = sqlite3.Row
    return conn


def generate_etag(data):
    """Strong ETag: quoted hash of the canonical JSON representation."""
    payload = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return '"%s"' % hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _parse_etag_list(header_value):
    """Split an If-Match / If-None-Match header into (is_star, [opaque tags])."""
    if header_value is None:
        return False, []
    value = header_value.strip()
    if value == "*":
        return True, []
    tags = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        if part.startswith("W/"):
            part = part[2:]
        if not (part.startswith('"') and part.endswith('"')):
            part = '"%s"' % part  # tolerate clients that strip the quotes
        tags.append(part)
    return False, tags


def none_match_hits(etag):
    """True when If-None-Match says the client's copy is current (weak comparison)."""
    star, tags = _parse_etag_list(request.headers.get("If-None-Match"))
    return star or etag in tags


def if_match_fails(etag):
    """True when an If-Match precondition is present and not satisfied (strong comparison)."""
    header = request.headers.get("If-Match")
    if header is None:
        return False
    if header.strip() == "*":
        return False
    tags = [t.strip() for t in header.split(",") if t.strip()]
    tags = [t if t.startswith(('"', "W/")) else '"%s"' % t for t in tags]
    return etag not in tags  # weak tags never match strongly


def conditional_json(data):
    etag = generate_etag(data)
    if none_match_hits(etag):
        resp = make_response("", 304)
    else:
        resp = make_response(jsonify(data), 200)
    resp.headers["ETag"] = etag
    resp.headers["Cache-Control"] = "no-cache"
    return resp


@app.route("/products", methods=["GET"])
def get_products():
    conn = get_db_connection()
    rows = conn.execute("SELECT * FROM products ORDER BY id").fetchall()
    conn.close()
    return conditional_json([dict(r) for r in rows])


@app.route("/products/<int:id>", methods=["GET"])
def get_product(id):
    conn = get_db_connection()
    row = conn.execute("SELECT * FROM products WHERE id = ?", (id,)).fetchone()
    conn.close()
    if row is None:
        return jsonify({"error": "Product not found"}), 404
    return conditional_json(dict(row))


@app.route("/products/<int:id>", methods=["PUT"])
def update_product(id):
    conn = get_db_connection()
    try:
        conn.execute("BEGIN IMMEDIATE")  # check-and-update atomically
        row = conn.execute("SELECT * FROM products WHERE id = ?", (id,)).fetchone()
        if row is None:
            conn.rollback()
            if request.headers.get("If-Match"):
                return jsonify({"error": "Precondition Failed"}), 412
            return jsonify({"error": "Product not found"}), 404
        current_etag = generate_etag(dict(row))
        if if_match_fails(current_etag):
            conn.rollback()
            resp = make_response(jsonify({"error": "Precondition Failed"}), 412)
            resp.headers["ETag"] = current_etag
            return resp

        data = request.get_json(silent=True) or {}
        fields, params = [], []
        for col in ("name", "price", "description"):
            if col in data:
                fields.append(f"{col} = ?")
                params.append(data[col])
        if fields:
            params.append(id)
            conn.execute(f"UPDATE products SET {', '.join(fields)} WHERE id = ?", params)
        conn.commit()
        updated = dict(conn.execute("SELECT * FROM products WHERE id = ?", (id,)).fetchone())
    finally:
        conn.close()
    resp = make_response(jsonify(updated), 200)
    resp.headers["ETag"] = generate_etag(updated)
    return resp


if __name__ == "__main__":
    app.run(host="0.0.0.0", port=int(os.environ.get("PORT", "5000")))
PY

cat > test_client.py <<'PY'
#!/usr/bin/env python3
"""HTTP test client for the ETag-enabled product API; writes /home/api/test_results.txt."""
import sys
import time

import requests

BASE_URL = "http://localhost:5000"
RESULTS_FILE = "/home/api/test_results.txt"


def wait_for_server(timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            requests.get(f"{BASE_URL}/products", timeout=2)
            return True
        except requests.RequestException:
            time.sleep(0.5)
    return False


def check(name, fn, results):
    try:
        ok, detail = fn()
    except Exception as exc:  # noqa: BLE001
        ok, detail = False, f"exception: {exc}"
    print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}")
    results.append(ok)


def main():
    if not wait_for_server():
        print("server not reachable")
    results = []
    state = {}

    def t1():
        r = requests.get(f"{BASE_URL}/products")
        state["etag"] = r.headers.get("ETag")
        return r.status_code == 200 and bool(state["etag"]), f"{r.status_code} ETag={state['etag']}"

    def t2():
        r = requests.get(f"{BASE_URL}/products", headers={"If-None-Match": state["etag"]})
        return r.status_code == 304 and r.content == b"", f"{r.status_code}"

    def t3():
        r = requests.get(f"{BASE_URL}/products", headers={"If-None-Match": '"stale-etag-0000"'})
        return (r.status_code == 200 and r.headers.get("ETag") == state["etag"]
                and isinstance(r.json(), list)), f"{r.status_code} ETag={r.headers.get('ETag')}"

    def t4():
        r = requests.get(f"{BASE_URL}/products/1")
        original = r.json()
        etag = r.headers["ETag"]
        upd = requests.put(f"{BASE_URL}/products/1", json={"name": original["name"] + " (v2)"},
                           headers={"If-Match": etag})
        ok = upd.status_code == 200 and upd.headers.get("ETag") not in (None, etag)
        # the collection ETag must change too, then restore the original value
        coll = requests.get(f"{BASE_URL}/products", headers={"If-None-Match": state["etag"]})
        ok = ok and coll.status_code == 200
        restore = requests.put(f"{BASE_URL}/products/1", json={"name": original["name"]},
                               headers={"If-Match": upd.headers.get("ETag", "")})
        ok = ok and restore.status_code == 200
        return ok, f"put={upd.status_code} collection={coll.status_code} restore={restore.status_code}"

    def t5():
        before = requests.get(f"{BASE_URL}/products/1").json()
        r = requests.put(f"{BASE_URL}/products/1", json={"name": "Should Not Apply"},
                         headers={"If-Match": '"wrong-etag-xyz"'})
        after = requests.get(f"{BASE_URL}/products/1").json()
        return r.status_code == 412 and before == after, f"{r.status_code}"

    def t6():
        r = requests.get(f"{BASE_URL}/products/1")
        r2 = requests.get(f"{BASE_URL}/products")
        ok = (r.status_code == 200 and "ETag" in r.headers and r.json().get("id") == 1
              and r2.status_code == 200 and "ETag" in r2.headers)
        return ok, f"{r.status_code}/{r2.status_code}"

    check("GET returns ETag header", t1, results)
    check("GET with matching If-None-Match returns 304", t2, results)
    check("GET with non-matching If-None-Match returns 200", t3, results)
    check("PUT with matching If-Match succeeds", t4, results)
    check("PUT with non-matching If-Match returns 412", t5, results)
    check("GET without conditional headers returns 200", t6, results)

    total, passed = len(results), sum(results)
    failed = total - passed
    overall = "PASS" if failed == 0 else "FAIL"
    with open(RESULTS_FILE, "w") as f:
        f.write(f"{total}\n{passed}\n{failed}\n{overall}\n")
    print(f"{passed}/{total} passed -> {overall}")
    return 0 if overall == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
PY

# (Re)start the API with the new code.
for pid in $(ps -eo pid,args | awk '/python3? .*app\.py/ && !/awk/ {print $1}'); do kill "$pid" 2>/dev/null || true; done
setsid nohup python3 app.py >/tmp/product_api.log 2>&1 < /dev/null &
python3 test_client.py
cat /home/api/test_results.txt
