# SPDX-License-Identifier: MIT
"""gpu-check: JAX on CUDA without preallocation (XLA's allocator grows and
shrinks through the driver as the program runs): a few jitted ops, arrays
created and dropped, checked against the event log (protocol:
gpu_check.py).  Exit 77: no jax or no GPU backend."""
import gc
import os
import sys
import time

print("GH-PID %d" % os.getpid(), flush=True)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
try:
    import jax
    import jax.numpy as jnp
except Exception as e:  # noqa: BLE001 - any import failure means skip
    print("GH-SKIP jax not importable: %s" % e, flush=True)
    sys.exit(77)
try:
    devs = jax.devices("gpu")
except Exception as e:  # noqa: BLE001 - no CUDA plugin or no device
    print("GH-SKIP no jax GPU backend: %s" % e, flush=True)
    sys.exit(77)
dev = devs[0]


def snap(label, arrays):
    """Each array's device buffer must lie in memory the log holds live."""
    for a in arrays:
        a.block_until_ready()
    lines = []
    for a in arrays:
        try:
            p = a.unsafe_buffer_pointer()
        except Exception as e:  # noqa: BLE001 - older jax: no pointer
            print("GH-NOTE jax: no buffer pointer (%s)" % e)
            continue
        if a.nbytes:
            lines.append("GH-IN 0x%x %d union" % (p, a.nbytes))
    print("GH-CASE jax-%s" % label)
    print("GH-T %d %s" % (time.monotonic_ns(), label))
    if lines:
        print("\n".join(lines))
    sys.stdout.flush()


@jax.jit
def step(w, x):
    y = jnp.tanh(x @ w)
    return w - 1e-3 * (x.T @ y), jnp.sum(y * y)


key = jax.random.PRNGKey(0)
w = jax.device_put(jax.random.normal(key, (512, 512)), dev)
keep = []
loss = None
for i in range(30):
    n = 128 + 64 * (i % 5)              # several shapes: several buffers
    x = jax.device_put(jax.random.normal(jax.random.fold_in(key, i),
                                         (n, 512)), dev)
    w, loss = step(w, x)
    keep.append(x)
    if len(keep) > 4:
        keep.pop(0)
snap("loop", [w] + keep)
big = jax.device_put(jnp.ones((64 << 20,), dtype=jnp.uint8), dev)
total = int(jnp.sum(big, dtype=jnp.uint32))
snap("big", [w, big])
del big, keep, x
gc.collect()
final = float(loss)
if total != 64 << 20 or not (final == final):
    print("GH-FAIL jax: wrong result (sum %d, loss %r)" % (total, final),
          flush=True)
else:
    print("GH-OK jax %s: 30 jitted steps, loss %.4f" % (jax.__version__,
                                                        final), flush=True)
