#!/bin/bash
set -e
mkdir -p /solution
cat > /solution/fixed_function.py <<'EOF'
def test_secret_step(secret_arn, token):
    """Test that new secret credentials work - FIXED VERSION"""
    import json
    import sys
    if '/opt/rotation' not in sys.path:
        sys.path.insert(0, '/opt/rotation')
    import db_mock
    import secrets_mock

    secret = secrets_mock.get_secret_value(secret_arn, version_id=token)

    # Fix 3: only test a version that carries the AWSPENDING staging label
    stages = secret.get('VersionStages') or []
    if 'AWSPENDING' not in stages:
        print(f"Version {token} of {secret_arn} is not staged as AWSPENDING")
        return False

    try:
        secret_data = json.loads(secret['SecretString'])
        # Fix 1: the secret JSON stores the password under 'password'
        conn_string = (
            f"postgresql://{secret_data['username']}:{secret_data['password']}"
            f"@{secret_data['host']}:{secret_data['port']}/mydb"
        )
    except (KeyError, TypeError, ValueError) as e:
        print(f"Malformed secret: {e}")
        return False

    try:
        db_mock.test_connection(conn_string)
    except (db_mock.ConnectionError, ConnectionError) as e:
        # Fix 2: a failed connection means the pending secret is not usable
        print(f"Connection failed: {e}")
        return False

    return True
EOF
cd /opt/rotation
python3 - <<'EOF'
import importlib.util
spec = importlib.util.spec_from_file_location("fixed_function", "/solution/fixed_function.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:db"
for tok in ["v1-pending", "v1-invalid", "v1-nolabel", "v1-current", "other"]:
    print(tok, mod.test_secret_step(arn, tok))
EOF
