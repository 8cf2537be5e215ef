#!/bin/bash
set -e
cd /workspace

# The data ships at /workspace/animation_data.json; the (empty) /workspace/data
# directory is the conventional data location, so keep a copy there as well.
mkdir -p /workspace/data
if [ -f /workspace/animation_data.json ] && [ ! -f /workspace/data/animation_data.json ]; then
    cp /workspace/animation_data.json /workspace/data/animation_data.json
fi

cat > /workspace/blur_engine.py <<'EOF'
#!/usr/bin/env python3
"""Temporal motion blur for 2D animated objects (fixed implementation).

Fixes relative to the original engine:
  * temporal samples are centred on the frame time: t in [-S/2, +S/2]
    (was 0 .. 2*S, which shifted and doubled the trail);
  * x uses vx and y uses vy (axes were swapped, giving wrong angles);
  * samples are weighted uniformly (box shutter) instead of a ramp;
  * weights are normalised to sum to 1;
  * the engine reads the actual animation data layout (a list of objects with
    flat position_x/position_y/velocity_vx/velocity_vy fields) as well as the
    nested position/velocity layout.
"""

import json
import math
import os
import sys

DEFAULT_SHUTTER_INTERVAL = 0.1
DEFAULT_NUM_SAMPLES = 10
DATA_CANDIDATES = ('/workspace/data/animation_data.json',
                   '/workspace/animation_data.json')


def load_animation_data(filename=None):
    """Load animation data from a JSON file."""
    candidates = [filename] if filename else list(DATA_CANDIDATES)
    for path in candidates:
        if path and os.path.exists(path):
            try:
                with open(path, 'r') as f:
                    return json.load(f)
            except json.JSONDecodeError:
                print(f"Error: Invalid JSON in '{path}'.")
                sys.exit(1)
    print(f"Error: Animation data file not found (tried {candidates}).")
    sys.exit(1)


def _object_state(obj):
    """Return (x, y, vx, vy) for either supported object layout."""
    if 'position' in obj:
        x = float(obj['position'].get('x', 0.0))
        y = float(obj['position'].get('y', 0.0))
    else:
        x = float(obj.get('position_x', 0.0))
        y = float(obj.get('position_y', 0.0))
    if 'velocity' in obj:
        vx = float(obj['velocity'].get('vx', 0.0))
        vy = float(obj['velocity'].get('vy', 0.0))
    else:
        vx = float(obj.get('velocity_vx', 0.0))
        vy = float(obj.get('velocity_vy', 0.0))
    return x, y, vx, vy


def compute_blur_trail(obj, shutter_interval=DEFAULT_SHUTTER_INTERVAL,
                       num_samples=DEFAULT_NUM_SAMPLES):
    """Sample an object's position across the shutter window.

    Samples are uniformly spaced over [-S/2, +S/2] around the frame time and
    carry equal, normalised weights (box shutter).
    """
    pos_x, pos_y, vel_x, vel_y = _object_state(obj)
    num_samples = max(1, int(num_samples))

    blur_trail = []
    for i in range(num_samples):
        if num_samples == 1:
            t_offset = 0.0
        else:
            t_offset = (i / (num_samples - 1) - 0.5) * shutter_interval
        blur_trail.append({
            't': t_offset,
            'x': pos_x + vel_x * t_offset,
            'y': pos_y + vel_y * t_offset,
            'weight': 1.0,
        })

    total_weight = sum(s['weight'] for s in blur_trail)
    for s in blur_trail:
        s['weight'] /= total_weight
    return blur_trail


def compute_blur_metrics(blur_trail, obj):
    """Compute metrics to validate blur characteristics."""
    _, _, vel_x, vel_y = _object_state(obj)
    velocity_magnitude = math.hypot(vel_x, vel_y)
    if len(blur_trail) < 2:
        return {'length': 0.0, 'angle': 0.0, 'valid': False,
                'velocity_magnitude': velocity_magnitude}

    start, end = blur_trail[0], blur_trail[-1]
    dx = end['x'] - start['x']
    dy = end['y'] - start['y']
    length = math.hypot(dx, dy)
    angle = math.degrees(math.atan2(dy, dx))
    expected_angle = math.degrees(math.atan2(vel_y, vel_x))
    angle_error = abs(angle - expected_angle)
    angle_error = min(angle_error, 360.0 - angle_error)
    if velocity_magnitude == 0:
        angle_error = 0.0
    return {
        'length': length,
        'angle': angle,
        'expected_angle': expected_angle,
        'angle_error': angle_error,
        'velocity_magnitude': velocity_magnitude,
        'valid': True,
    }


def _objects_of(data):
    if isinstance(data, dict):
        if 'objects' in data:
            return data['objects'], data.get('shutter_interval')
        return [data], data.get('shutter_interval')
    return list(data), None


def calculate_motion_blur(data, shutter_interval=None,
                          num_samples=DEFAULT_NUM_SAMPLES):
    """Compute motion blur for every object in the animation data.

    ``data`` may be the list of objects from animation_data.json, a dict with
    an ``objects`` list (and optional ``shutter_interval``), or one object.
    Returns ``{object_id: {'blur_trail': [...], 'samples': [...], 'metrics': {...}}}``.
    """
    objects, data_shutter = _objects_of(data)
    if shutter_interval is None:
        shutter_interval = data_shutter if data_shutter is not None else DEFAULT_SHUTTER_INTERVAL

    results = {}
    for idx, obj in enumerate(objects):
        obj_id = obj.get('id', obj.get('name', f'Object_{idx}'))
        trail = compute_blur_trail(obj, shutter_interval, num_samples)
        metrics = compute_blur_metrics(trail, obj)
        results[obj_id] = {
            'description': obj.get('description', ''),
            'shutter_interval': shutter_interval,
            'blur_trail': trail,
            'samples': trail,
            'metrics': metrics,
        }
    return results


def main():
    print("Motion Blur Engine - Processing animation data...")
    print("=" * 60)
    data = load_animation_data(sys.argv[1] if len(sys.argv) > 1 else None)
    results = calculate_motion_blur(data)
    objects, _ = _objects_of(data)
    print(f"Number of objects: {len(objects)}\n")

    all_valid = True
    for obj_id, res in results.items():
        m = res['metrics']
        print(f"Object: {obj_id} ({res['description']})")
        print(f"  Blur length: {m['length']:.2f}")
        print(f"  Blur angle: {m['angle']:.2f} deg")
        print(f"  Expected angle: {m.get('expected_angle', 0.0):.2f} deg")
        print(f"  Velocity magnitude: {m['velocity_magnitude']:.2f}")
        if not m['valid']:
            all_valid = False
            continue
        if m['velocity_magnitude'] > 0.1:
            if m['angle_error'] > 5.0:
                print("  WARNING: Blur angle doesn't match motion direction!")
                all_valid = False
            expected_len = m['velocity_magnitude'] * res['shutter_interval']
            if abs(m['length'] - expected_len) > 1e-6 * max(1.0, expected_len):
                print("  WARNING: Blur length not proportional to velocity!")
                all_valid = False
        wsum = sum(s['weight'] for s in res['blur_trail'])
        if abs(wsum - 1.0) > 1e-9:
            print("  WARNING: weights not normalised")
            all_valid = False
        print()

    print("=" * 60)
    print("Status: All objects processed successfully" if all_valid
          else "Status: ERRORS DETECTED - Blur artifacts present")
    return 0 if all_valid else 1


if __name__ == '__main__':
    sys.exit(main())
EOF

if python3 /workspace/blur_engine.py; then
    passed=yes
else
    passed=no
fi

cat > /workspace/solution.txt <<EOF
files_fixed: blur_engine.py
bug_category: multiple_issues
test_passed: ${passed}
EOF
cat /workspace/solution.txt
