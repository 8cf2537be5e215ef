#!/bin/bash
set -e
WS=${WORKSPACE_DIR:-/workspace}
mkdir -p "$WS"
cd "$WS"

cat > "$WS/robust_pipeline.py" <<'EOF'
"""Robust, verifiable persistence for scikit-learn pipelines.

A saved pipeline consists of two files:

* ``<name>.joblib``           - the joblib/pickle payload of the fitted pipeline
* ``<name>.joblib.meta.json`` - a manifest with
    - the SHA-256 digest and size of the payload (corruption detection),
    - environment metadata (Python / sklearn / numpy / scipy / pandas / joblib
      versions, platform) for compatibility checks *before* unpickling,
    - fingerprints of the source files that define custom components,
    - a validation sample with the exact predictions/probabilities the
      pipeline produced when it was saved (behavioural verification),
    - an HMAC-SHA256 signature over the whole manifest (authenticity /
      tamper detection; the payload digest is inside the signed manifest).

Custom components defined here (``ChurnFeatureEngineer`` and
``NamedFunctionTransformer``) serialise reliably: they live in an importable
module (never ``__main__``) and ``NamedFunctionTransformer`` stores its function
as an importable ``"module:qualname"`` reference instead of pickling a callable
(lambdas / closures are rejected up front instead of failing at load time).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import importlib
import inspect
import io
import json
import os
import platform
import secrets
import sys
import tempfile
import warnings

import numpy as np
import pandas as pd
import joblib
import sklearn
from sklearn.base import BaseEstimator, TransformerMixin

FORMAT_VERSION = "1.0"
META_SUFFIX = ".meta.json"
KEY_ENV_VAR = "ROBUST_PIPELINE_KEY"


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------
class PipelinePersistenceError(Exception):
    """Base class for all persistence errors."""


class SerializationError(PipelinePersistenceError):
    """The pipeline cannot be saved reliably."""


class IntegrityError(PipelinePersistenceError):
    """The payload does not match its recorded digest (corrupted/truncated)."""


class TamperError(PipelinePersistenceError):
    """The manifest signature is missing or invalid (tampered / wrong key)."""


class CompatibilityError(PipelinePersistenceError):
    """The current environment is incompatible with the saved pipeline."""


class ValidationError(PipelinePersistenceError):
    """The loaded pipeline does not reproduce the recorded predictions."""


# --------------------------------------------------------------------------
# Custom components
# --------------------------------------------------------------------------
def signed_log1p(X):
    """Sign-preserving log1p, safe for zero/negative values."""
    X = np.asarray(X, dtype=float)
    return np.sign(X) * np.log1p(np.abs(X))


def _callable_reference(func):
    """Return an importable 'module:qualname' reference for ``func``."""
    if isinstance(func, str):
        return func
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise SerializationError(
            f"Function {func!r} is a lambda/closure/local function and cannot be "
            "serialised reliably; define it at module level in an importable module."
        )
    if module == "__main__":
        raise SerializationError(
            f"Function {qualname} is defined in __main__ and would not be importable "
            "on another server; move it into an importable module."
        )
    return f"{module}:{qualname}"


def _resolve_reference(ref):
    module_name, _, qualname = ref.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class NamedFunctionTransformer(BaseEstimator, TransformerMixin):
    """Stateless transformer applying a module-level function.

    Unlike ``FunctionTransformer`` holding an arbitrary callable, the function
    is pickled as a ``"module:qualname"`` string and re-imported on load.
    """

    def __init__(self, func="robust_pipeline:signed_log1p"):
        self.func = func

    def _get_callable(self):
        return _resolve_reference(self.func) if isinstance(self.func, str) else self.func

    def fit(self, X, y=None):
        self.func_ref_ = _callable_reference(self.func)
        self.n_features_in_ = np.asarray(X).shape[1] if np.ndim(X) == 2 else 1
        return self

    def transform(self, X):
        return self._get_callable()(X)

    def get_feature_names_out(self, input_features=None):
        if input_features is None:
            input_features = [f"x{i}" for i in range(self.n_features_in_)]
        return np.asarray(list(input_features), dtype=object)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["func"] = _callable_reference(state["func"])
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)


class ChurnFeatureEngineer(BaseEstimator, TransformerMixin):
    """Adds engineered churn features to a customer DataFrame."""

    def __init__(self, new_customer_months=12):
        self.new_customer_months = new_customer_months

    def fit(self, X, y=None):
        X = pd.DataFrame(X)
        self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):
        X = pd.DataFrame(X).copy()
        tenure = X["account_tenure_months"].astype(float)
        safe_tenure = tenure.clip(lower=1.0)
        bill = X["monthly_bill"].astype(float)
        spent = X["total_spent"].astype(float)
        X["avg_monthly_spend"] = spent / safe_tenure
        X["bill_to_avg_ratio"] = bill / (X["avg_monthly_spend"].replace(0, np.nan))
        X["bill_to_avg_ratio"] = X["bill_to_avg_ratio"].fillna(0.0)
        X["tenure_years"] = tenure / 12.0
        X["is_new_customer"] = (tenure < self.new_customer_months).astype(float)
        return X

    def get_feature_names_out(self, input_features=None):
        base = list(self.feature_names_in_) if input_features is None else list(input_features)
        return np.asarray(base + ["avg_monthly_spend", "bill_to_avg_ratio",
                                  "tenure_years", "is_new_customer"], dtype=object)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _atomic_write(path, data):
    directory = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True).encode("utf-8")


def _sign(manifest, key):
    body = {k: v for k, v in manifest.items() if k != "signature"}
    return hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()


def _coerce_key(key):
    if key is None:
        return None
    if isinstance(key, str):
        return key.encode("utf-8")
    return bytes(key)


def get_or_create_key(key_path):
    """Return a signing key, from $ROBUST_PIPELINE_KEY or a private key file."""
    env = os.environ.get(KEY_ENV_VAR)
    if env:
        return env.encode("utf-8")
    if os.path.exists(key_path):
        with open(key_path, "rb") as f:
            return f.read().strip()
    key = secrets.token_hex(32).encode("ascii")
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def _package_version(name):
    try:
        module = importlib.import_module(name)
        return getattr(module, "__version__", "unknown")
    except Exception:
        return None


def environment_metadata():
    return {
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "byteorder": sys.byteorder,
        "packages": {
            "sklearn": sklearn.__version__,
            "numpy": np.__version__,
            "scipy": _package_version("scipy"),
            "pandas": pd.__version__,
            "joblib": joblib.__version__,
        },
    }


def _iter_estimators(est, seen=None):
    """Yield every estimator object nested inside ``est``."""
    if seen is None:
        seen = set()
    if id(est) in seen:
        return
    seen.add(id(est))
    yield est
    children = []
    if hasattr(est, "steps"):
        children += [s for _, s in est.steps]
    if hasattr(est, "transformers"):
        children += [t for _, t, _ in est.transformers]
    if hasattr(est, "transformers_"):
        children += [t for _, t, _ in est.transformers_]
    if hasattr(est, "transformer_list"):
        children += [t for _, t in est.transformer_list]
    if hasattr(est, "get_params"):
        try:
            children += [v for v in est.get_params(deep=False).values()
                         if hasattr(v, "get_params")]
        except Exception:
            pass
    for child in children:
        if child is None or isinstance(child, str):
            continue
        yield from _iter_estimators(child, seen)


_STD_PREFIXES = ("sklearn", "numpy", "scipy", "pandas", "joblib", "builtins")


def _custom_components(pipeline):
    """Describe non-library components; refuse ones living in __main__."""
    components = {}
    for est in _iter_estimators(pipeline):
        cls = type(est)
        module = cls.__module__
        if module.split(".")[0] in _STD_PREFIXES:
            continue
        if module == "__main__":
            raise SerializationError(
                f"Custom component {cls.__qualname__} is defined in __main__; it would "
                "not be importable when loading elsewhere. Define it in a module.")
        if "<" in cls.__qualname__:
            raise SerializationError(f"Custom component {cls.__qualname__} is a local class.")
        entry = {"module": module, "class": cls.__qualname__}
        try:
            src_file = inspect.getsourcefile(cls)
            if src_file and os.path.exists(src_file):
                entry["source_sha256"] = _sha256_file(src_file)
        except (TypeError, OSError):
            pass
        components[f"{module}:{cls.__qualname__}"] = entry
    return components


def _describe_steps(pipeline):
    if hasattr(pipeline, "steps"):
        return [[name, f"{type(step).__module__}.{type(step).__qualname__}"]
                for name, step in pipeline.steps]
    return [[type(pipeline).__name__, f"{type(pipeline).__module__}.{type(pipeline).__qualname__}"]]


def _frame_to_json(X):
    X = pd.DataFrame(X)
    return {
        "columns": [str(c) for c in X.columns],
        "dtypes": {str(c): str(t) for c, t in X.dtypes.items()},
        "records": json.loads(X.to_json(orient="split", double_precision=15))["data"],
    }


def _frame_from_json(spec):
    X = pd.DataFrame(spec["records"], columns=spec["columns"])
    for col, dtype in spec["dtypes"].items():
        if dtype.startswith(("int", "float", "bool")):
            X[col] = X[col].astype(dtype)
        else:
            X[col] = X[col].astype(object)
    return X


def _outputs(pipeline, X):
    out = {"predictions": np.asarray(pipeline.predict(X)).tolist()}
    if hasattr(pipeline, "predict_proba"):
        try:
            out["probabilities"] = np.asarray(pipeline.predict_proba(X)).tolist()
        except Exception:
            pass
    return out


def outputs_identical(a, b, atol=0.0):
    """Exact (or atol-tolerant for probabilities) comparison of outputs."""
    if list(a["predictions"]) != list(b["predictions"]):
        return False
    if "probabilities" in a or "probabilities" in b:
        if "probabilities" not in a or "probabilities" not in b:
            return False
        pa, pb = np.asarray(a["probabilities"]), np.asarray(b["probabilities"])
        if pa.shape != pb.shape:
            return False
        if atol == 0.0:
            return bool(np.array_equal(pa, pb))
        return bool(np.allclose(pa, pb, rtol=0.0, atol=atol))
    return True


def _major_minor(version):
    if not version:
        return None
    return tuple(version.split(".")[:2])


def check_compatibility(metadata, strict=False):
    """Return a list of compatibility problems; raise if ``strict``."""
    saved = metadata.get("environment", {})
    current = environment_metadata()
    problems = []
    if _major_minor(saved.get("python_version")) != _major_minor(current["python_version"]):
        problems.append(f"python {saved.get('python_version')} -> {current['python_version']}")
    for pkg, version in saved.get("packages", {}).items():
        cur = current["packages"].get(pkg)
        if version and cur and version != cur:
            sev = "minor/major" if _major_minor(version) != _major_minor(cur) else "patch"
            problems.append(f"{pkg} {version} -> {cur} ({sev})")
    if saved.get("byteorder") and saved["byteorder"] != current["byteorder"]:
        problems.append("byte order differs")
    if problems:
        msg = "Environment differs from the one that saved the pipeline: " + "; ".join(problems)
        if strict:
            raise CompatibilityError(msg)
        warnings.warn(msg, RuntimeWarning)
    return problems


def metadata_path_for(path):
    return str(path) + META_SUFFIX


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------
def save_pipeline(pipeline, path, X_validation=None, secret_key=None,
                  extra_metadata=None, compress=3):
    """Serialise ``pipeline`` to ``path`` plus a signed manifest.

    Before anything is written the payload is round-tripped in memory and the
    reloaded copy must reproduce the predictions on ``X_validation``.
    Returns the manifest (dict).
    """
    path = str(path)
    key = _coerce_key(secret_key)
    components = _custom_components(pipeline)

    buffer = io.BytesIO()
    try:
        joblib.dump(pipeline, buffer, compress=compress)
    except Exception as exc:  # pickling failures, unpicklable attributes, ...
        raise SerializationError(f"Pipeline could not be serialised: {exc}") from exc
    payload = buffer.getvalue()

    validation = None
    if X_validation is not None:
        X_val = pd.DataFrame(X_validation)
        validation_spec = _frame_to_json(X_val)
        # Use the JSON round-tripped sample so load-time validation sees
        # exactly the same input values.
        X_val = _frame_from_json(validation_spec)
        expected = _outputs(pipeline, X_val)
        try:
            roundtrip = joblib.load(io.BytesIO(payload))
        except Exception as exc:
            raise SerializationError(f"Serialised pipeline cannot be reloaded: {exc}") from exc
        if not outputs_identical(expected, _outputs(roundtrip, X_val)):
            raise SerializationError("In-memory round trip changed the pipeline's predictions")
        validation = {"X": validation_spec, "expected": expected,
                      "n_samples": int(len(X_val))}

    manifest = {
        "format_version": FORMAT_VERSION,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "payload": {
            "file": os.path.basename(path),
            "sha256": _sha256_bytes(payload),
            "size_bytes": len(payload),
            "serializer": "joblib",
            "compress": compress,
        },
        "pipeline": {
            "class": f"{type(pipeline).__module__}.{type(pipeline).__qualname__}",
            "steps": _describe_steps(pipeline),
            "custom_components": components,
        },
        "environment": environment_metadata(),
        "validation": validation,
        "extra": extra_metadata or {},
        "signature": None,
    }
    if key is not None:
        manifest["signature"] = {"algorithm": "HMAC-SHA256", "value": _sign(manifest, key)}

    _atomic_write(path, payload)
    _atomic_write(metadata_path_for(path), json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8"))
    return manifest


def read_metadata(path):
    meta_path = metadata_path_for(path)
    if not os.path.exists(meta_path):
        raise IntegrityError(f"Manifest {meta_path} is missing")
    try:
        with open(meta_path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise IntegrityError(f"Manifest {meta_path} is unreadable: {exc}") from exc


def verify_pipeline_file(path, secret_key=None, require_signature=None):
    """Check authenticity and integrity without unpickling. Returns the manifest."""
    path = str(path)
    key = _coerce_key(secret_key)
    if require_signature is None:
        require_signature = key is not None
    manifest = read_metadata(path)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise CompatibilityError(f"Unsupported manifest format {manifest.get('format_version')!r}")

    signature = manifest.get("signature")
    if signature:
        if key is None:
            if require_signature:
                raise TamperError("A signing key is required to verify this pipeline")
            warnings.warn("Manifest is signed but no key was given; authenticity not verified",
                          RuntimeWarning)
        elif not hmac.compare_digest(str(signature.get("value", "")), _sign(manifest, key)):
            raise TamperError("Manifest signature is invalid: pipeline tampered with or wrong key")
    elif require_signature:
        raise TamperError("Manifest is not signed")

    if not os.path.exists(path):
        raise IntegrityError(f"Payload {path} is missing")
    info = manifest.get("payload", {})
    size = os.path.getsize(path)
    if size != info.get("size_bytes"):
        raise IntegrityError(f"Payload size {size} != recorded {info.get('size_bytes')} (truncated/corrupted)")
    digest = _sha256_file(path)
    if not hmac.compare_digest(digest, str(info.get("sha256", ""))):
        raise IntegrityError("Payload SHA-256 mismatch: file is corrupted or was modified")
    return manifest


def load_pipeline(path, secret_key=None, require_signature=None, strict_versions=False,
                  validate=True, return_metadata=False):
    """Load a pipeline saved with :func:`save_pipeline`, verifying it first.

    Order: signature -> payload digest -> environment compatibility ->
    unpickle -> custom component code check -> behavioural validation.
    Nothing is unpickled unless the integrity/authenticity checks pass.
    """
    path = str(path)
    manifest = verify_pipeline_file(path, secret_key, require_signature)
    check_compatibility(manifest, strict=strict_versions)

    for name, comp in manifest.get("pipeline", {}).get("custom_components", {}).items():
        try:
            module = importlib.import_module(comp["module"])
            src = inspect.getsourcefile(module)
        except Exception as exc:
            raise CompatibilityError(f"Custom component {name} is not importable: {exc}") from exc
        recorded = comp.get("source_sha256")
        if recorded and src and os.path.exists(src) and _sha256_file(src) != recorded:
            msg = f"Source of custom component {name} changed since the pipeline was saved"
            if strict_versions:
                raise CompatibilityError(msg)
            warnings.warn(msg, RuntimeWarning)

    try:
        with open(path, "rb") as f:
            pipeline = joblib.load(f)
    except Exception as exc:
        raise IntegrityError(f"Payload could not be deserialised: {exc}") from exc

    expected_class = manifest.get("pipeline", {}).get("class")
    actual_class = f"{type(pipeline).__module__}.{type(pipeline).__qualname__}"
    if expected_class and expected_class != actual_class:
        raise ValidationError(f"Loaded object is {actual_class}, expected {expected_class}")

    if validate and manifest.get("validation"):
        val = manifest["validation"]
        X_val = _frame_from_json(val["X"])
        if not outputs_identical(val["expected"], _outputs(pipeline, X_val)):
            raise ValidationError("Loaded pipeline does not reproduce the recorded predictions")

    return (pipeline, manifest) if return_metadata else pipeline


# Short aliases
save = save_pipeline
load = load_pipeline
load_pipeline_with_validation = load_pipeline
EOF

cat > "$WS/demo.py" <<'EOF'
"""Demonstration of robust pipeline persistence on the churn data set."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import robust_pipeline as rp

DATA_PATH = os.path.join(HERE, "churn_data.csv")
MODEL_PATH = os.path.join(HERE, "churn_pipeline.joblib")
KEY_PATH = os.path.join(HERE, ".pipeline_signing.key")
REPORT_PATH = os.path.join(HERE, "verification.json")
DETAILS_PATH = os.path.join(HERE, "verification_details.json")

NUMERIC = ["customer_age", "account_tenure_months", "monthly_bill", "total_spent",
           "avg_monthly_spend", "bill_to_avg_ratio", "tenure_years", "is_new_customer"]
CATEGORICAL = ["contract_type", "payment_method"]
TARGET = "churn"


def build_pipeline():
    numeric = Pipeline([
        ("impute", SimpleImputer(strategy="median")),
        ("log", rp.NamedFunctionTransformer("robust_pipeline:signed_log1p")),
        ("scale", StandardScaler()),
    ])
    categorical = Pipeline([
        ("impute", SimpleImputer(strategy="most_frequent")),
        ("onehot", OneHotEncoder(handle_unknown="ignore")),
    ])
    preprocess = ColumnTransformer([
        ("num", numeric, NUMERIC),
        ("cat", categorical, CATEGORICAL),
    ])
    return Pipeline([
        ("features", rp.ChurnFeatureEngineer()),
        ("preprocess", preprocess),
        ("model", RandomForestClassifier(n_estimators=200, random_state=42)),
    ])


def predict_in_subprocess(model_path, X, key):
    """Load the pipeline in a fresh interpreter (as another server would)."""
    tmp = tempfile.mkdtemp()
    try:
        x_path = os.path.join(tmp, "X.pkl")
        out_path = os.path.join(tmp, "out.json")
        X.to_pickle(x_path)
        code = (
            "import json, sys, pandas as pd\n"
            f"sys.path.insert(0, {HERE!r})\n"
            "import robust_pipeline as rp\n"
            f"p = rp.load_pipeline({model_path!r}, secret_key=sys.argv[1])\n"
            f"X = pd.read_pickle({x_path!r})\n"
            f"json.dump({{'predictions': p.predict(X).tolist(), 'probabilities': p.predict_proba(X).tolist()}}, open({out_path!r}, 'w'))\n"
        )
        subprocess.run([sys.executable, "-c", code, key.decode()], check=True, cwd=tmp)
        with open(out_path) as f:
            return json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def expect_failure(name, func, exc_type, details):
    try:
        func()
    except exc_type as exc:
        details["edge_cases"][name] = {"detected": True, "error": f"{type(exc).__name__}: {exc}"}
        return True
    except Exception as exc:  # detected, but with an unexpected error type
        details["edge_cases"][name] = {"detected": False, "error": f"unexpected {type(exc).__name__}: {exc}"}
        return False
    details["edge_cases"][name] = {"detected": False, "error": None}
    return False


def run_edge_cases(key, X_test, details):
    tmp = tempfile.mkdtemp()
    try:
        def copy_pair(name):
            dst = os.path.join(tmp, name)
            shutil.copy(MODEL_PATH, dst)
            shutil.copy(rp.metadata_path_for(MODEL_PATH), rp.metadata_path_for(dst))
            return dst

        # 1. corrupted payload (one flipped byte)
        p = copy_pair("corrupt.joblib")
        with open(p, "r+b") as f:
            f.seek(os.path.getsize(p) // 2)
            b = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([b[0] ^ 0xFF]))
        expect_failure("corrupted_payload", lambda: rp.load_pipeline(p, secret_key=key),
                       rp.IntegrityError, details)

        # 2. truncated payload
        p = copy_pair("truncated.joblib")
        with open(p, "r+b") as f:
            f.truncate(os.path.getsize(p) // 2)
        expect_failure("truncated_payload", lambda: rp.load_pipeline(p, secret_key=key),
                       rp.IntegrityError, details)

        # 3. tampered manifest (attacker swaps in a new payload digest)
        p = copy_pair("tampered.joblib")
        meta_p = rp.metadata_path_for(p)
        with open(meta_p) as f:
            meta = json.load(f)
        meta["payload"]["sha256"] = "0" * 64
        with open(meta_p, "w") as f:
            json.dump(meta, f)
        expect_failure("tampered_manifest", lambda: rp.load_pipeline(p, secret_key=key),
                       rp.TamperError, details)

        # 4. wrong key
        p = copy_pair("wrongkey.joblib")
        expect_failure("wrong_key", lambda: rp.load_pipeline(p, secret_key=b"not-the-key"),
                       rp.TamperError, details)

        # 5. missing manifest
        p = copy_pair("nometa.joblib")
        os.remove(rp.metadata_path_for(p))
        expect_failure("missing_manifest", lambda: rp.load_pipeline(p, secret_key=key),
                       rp.IntegrityError, details)

        # 6. un-serialisable custom component (lambda) is rejected at save time
        #    (fit already fails fast; save would refuse it as well)
        def save_lambda_pipeline():
            bad = Pipeline([("fn", rp.NamedFunctionTransformer(lambda X: X))])
            bad.fit(np.zeros((3, 2)))
            rp.save_pipeline(bad, os.path.join(tmp, "bad.joblib"))
        expect_failure("lambda_component_rejected", save_lambda_pipeline,
                       rp.SerializationError, details)

        # 7. environment compatibility check against a manifest from "another" env
        meta = rp.read_metadata(MODEL_PATH)
        meta["environment"]["packages"]["sklearn"] = "0.0.1"
        expect_failure("version_mismatch_detected",
                       lambda: rp.check_compatibility(meta, strict=True),
                       rp.CompatibilityError, details)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    report = {"serialization_successful": False, "load_successful": False,
              "predictions_match": False}
    details = {"edge_cases": {}}

    df = pd.read_csv(DATA_PATH)
    X = df.drop(columns=[TARGET])
    y = df[TARGET].astype(int)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, random_state=42, stratify=y)

    pipeline = build_pipeline()
    pipeline.fit(X_train, y_train)
    original = {"predictions": pipeline.predict(X_test).tolist(),
                "probabilities": pipeline.predict_proba(X_test).tolist()}
    details["test_accuracy"] = float(accuracy_score(y_test, original["predictions"]))
    print(f"Trained pipeline, hold-out accuracy = {details['test_accuracy']:.3f}")

    key = rp.get_or_create_key(KEY_PATH)

    try:
        manifest = rp.save_pipeline(pipeline, MODEL_PATH, X_validation=X_test.head(50),
                                    secret_key=key,
                                    extra_metadata={"model": "customer churn",
                                                    "train_rows": int(len(X_train))})
        report["serialization_successful"] = (
            os.path.exists(MODEL_PATH) and os.path.exists(rp.metadata_path_for(MODEL_PATH)))
        details["payload_sha256"] = manifest["payload"]["sha256"]
        details["environment"] = manifest["environment"]
        print(f"Saved pipeline to {MODEL_PATH}")
    except Exception:
        traceback.print_exc()

    loaded = None
    if report["serialization_successful"]:
        try:
            loaded = rp.load_pipeline(MODEL_PATH, secret_key=key, require_signature=True)
            report["load_successful"] = True
            print("Loaded and verified pipeline")
        except Exception:
            traceback.print_exc()

    if loaded is not None:
        reloaded = {"predictions": loaded.predict(X_test).tolist(),
                    "probabilities": loaded.predict_proba(X_test).tolist()}
        same_process = rp.outputs_identical(original, reloaded)
        try:
            other_process = rp.outputs_identical(original, predict_in_subprocess(MODEL_PATH, X_test, key))
        except Exception:
            traceback.print_exc()
            other_process = False
        details["predictions_match_same_process"] = same_process
        details["predictions_match_fresh_process"] = other_process
        report["predictions_match"] = bool(same_process and other_process)
        print(f"Predictions identical: same process={same_process}, fresh process={other_process}")

        try:
            run_edge_cases(key, X_test, details)
        except Exception:
            traceback.print_exc()
        for name, res in details["edge_cases"].items():
            print(f"  edge case {name}: {'detected' if res['detected'] else 'NOT detected'}")

    with open(REPORT_PATH, "w") as f:
        json.dump(report, f, indent=2)
    with open(DETAILS_PATH, "w") as f:
        json.dump(details, f, indent=2, default=str)
    print(json.dumps(report, indent=2))
    return 0 if all(report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
EOF

python3 "$WS/demo.py"
