#!/usr/bin/python3
"""optim_ref.py -- every optimizer of a shard against NumPy.

A NumPy transcription of Keras 3's update rules (keras/src/optimizers/, one
file per class, and the base optimizer's weight decay), written from
Keras's source in its order of operations and with its float32 casts: a
Python-float expression of a setting (``1 - self.beta_1``) is computed in
double and rounded once, a setting that meets a float32 tensor is rounded
to float32 first. For each case, seeded random gradients go through a real
shard store (build/*/tools/optim_check: ps_store_apply, closed and
reopened half-way) for STEPS steps; the parameters after every step and
the slots at the end must equal the transcription's.

Tolerance: |store - numpy| <= 1e-6 * |numpy| + 4 ulp(scale) per element,
where scale is the largest |value| of that variable at that step. The
relative part is the 1e-6 asked. The ulps of the variable's scale are for
the two places where hetps rounds once differently from Keras: Adam's and
AdamW's lr_t, taken in double (as hetps always has, kept bit for bit) where
Keras takes it in float32, and libm's powf (Ftrl at a learning_rate_power
other than -0.5) where the transcription rounds correctly. That changes an
update by an ulp; an element near zero, the difference of two close numbers
(p - m*lr_t/..., Ftrl's (dA/lr)*p - g), then differs by an ulp of its
operands, which is many of its own. Every other case must come out bit for
bit, and does.

Usage: optim_ref.py BUILD_DIR [STEPS]    (exit 0 when every case passes)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

F = np.float32
KERNEL, BIAS = 300, 10          # "dense/kernel", "dense/bias"


def f(x):
    return np.float32(x)


def power(x, e):
    """x**e in float32, correctly rounded (taken in double), as libm's powf
    (and so TensorFlow's pow on a CPU) gives it: NumPy's own float32 power
    is an ulp off in about a fifth of the cases, which Ftrl's difference of
    two powers over the learning rate would blow up."""
    return np.power(np.float64(x) if np.ndim(x) == 0 else
                    np.asarray(x, dtype=np.float64), np.float64(e)).astype(F)


def schedule(lr, step):
    """keras/src/optimizers/schedules/learning_rate_schedule.py: the rate
    at optimizer.iterations `step`, float32 throughout; a number is
    itself."""
    if not isinstance(lr, dict):
        return f(lr)
    k, c = lr["class_name"], lr["config"]
    x = f(step)
    if k == "PiecewiseConstantDecay":
        b, v = c["boundaries"], c["values"]
        if step <= b[0]:
            return f(v[0])
        if step > b[-1]:
            return f(v[-1])
        for lo, hi, val in zip(b[:-1], b[1:], v[1:-1]):
            if lo < step <= hi:
                return f(val)
    init = f(c["initial_learning_rate"])
    ds = f(c["decay_steps"])
    if k in ("ExponentialDecay", "InverseTimeDecay"):
        p = x / ds
        if c.get("staircase"):
            p = np.floor(p)
        if k == "ExponentialDecay":
            return init * power(f(c["decay_rate"]), p)
        return init / (f(1) + f(c["decay_rate"]) * p)
    if k == "PolynomialDecay":
        end = f(c.get("end_learning_rate", 0.0001))
        pw = f(c.get("power", 1.0))
        if c.get("cycle"):
            mult = f(1.0) if x == 0 else np.ceil(x / f(c["decay_steps"]))
            ds = ds * mult
        else:
            x = min(x, ds)
        p = x / ds
        return (init - end) * power(f(1) - p, pw) + end
    if k == "CosineDecay":
        alpha = c.get("alpha", 0.0)

        def decay(s, frm):
            frac = s / ds
            cd = f(0.5) * (f(1.0) + cos(f(np.pi) * frac))
            return frm * (f(1 - alpha) * cd + f(alpha))
        if c.get("warmup_target") is None:
            return decay(min(x, ds), init)
        wt, ws = f(c["warmup_target"]), f(c.get("warmup_steps", 0))
        x = min(x, ds + ws)
        if x < ws:
            return (wt - init) * (x / ws) + init
        return decay(x - ws, wt)
    raise ValueError(k)


def cos(x):
    """cos in float32, correctly rounded (as power above)."""
    return F(np.cos(np.float64(x)))


class Ref:
    """One optimizer over a list of float32 variables, as Keras 3 runs it."""

    def __init__(self, cfg, variables, names):
        self.c = dict(cfg)
        self.t = self.c.pop("type")
        self.p = [v.copy() for v in variables]
        self.names = names
        self.it = 0                         # optimizer.iterations
        self.u_product = f(1.0)             # Nadam's scalar variable
        d = DEFAULTS[self.t]
        for k, v in d.items():
            self.c.setdefault(k, v)
        self.slots = [self.build(v) for v in self.p]

    def build(self, v):
        z = np.zeros_like(v)
        t, c = self.t, self.c
        if t == "sgd":
            return [z.copy()] if c["momentum"] != 0 else []
        if t in ("adam", "adamw"):
            return [z.copy(), z.copy()] + ([z.copy()] if c["amsgrad"] else [])
        if t == "rmsprop":
            s = [z.copy()]
            if c["momentum"] > 0:
                s.append(z.copy())
            if c["centered"]:
                s.append(z.copy())
            return s
        if t == "adagrad":
            return [np.full_like(v, f(c["initial_accumulator_value"]))]
        if t in ("nadam", "adamax"):
            return [z.copy(), z.copy()]
        if t == "ftrl":
            return [np.full_like(v, f(c["initial_accumulator_value"])),
                    z.copy()]
        raise ValueError(t)

    def excluded(self, name):
        words = self.c.get("exclude_from_weight_decay", [])
        leaf = name.split("/")[-1]          # Keras 3's variable.name
        return any(w in leaf for w in words)

    def step(self, grads):
        lr = schedule(self.c["learning_rate"], self.it)
        cv = self.c.get("clipvalue")
        if cv:                              # base_optimizer._clip_gradients
            grads = [np.clip(g, -f(cv), f(cv)) for g in grads]
        wd = self.c.get("weight_decay", 0) or 0
        # base_optimizer._apply_weight_decay, before the update
        if wd:
            for i, p in enumerate(self.p):
                if not self.excluded(self.names[i]):
                    self.p[i] = p - p * f(wd) * lr
        if self.t == "nadam":               # Nadam._backend_update_step
            self.u_product = self.u_product * f(self.c["beta_1"]) * (
                f(1.0) - f(0.5) * power(f(0.96), f(self.it + 1)))
        for i, g in enumerate(grads):
            getattr(self, "update_" + self.t)(i, g.astype(F), lr)
        self.it += 1

    # ---- one method per keras/src/optimizers/*.py update_step ----------

    def update_sgd(self, i, g, lr):
        c, p = self.c, self.p[i]
        if c["momentum"] != 0:
            m = self.slots[i][0]
            mu = f(c["momentum"])
            m[:] = m * mu - g * lr
            if c["nesterov"]:
                self.p[i] = p + (m * mu - g * lr)
            else:
                self.p[i] = p + m
        else:
            self.p[i] = p - g * lr

    def update_rmsprop(self, i, g, lr):
        c, p, s = self.c, self.p[i], self.slots[i]
        rho = f(c["rho"])
        v = s[0]
        v[:] = rho * v + f(1 - c["rho"]) * (g * g)
        if c["centered"]:
            a = s[-1]
            a[:] = rho * a + f(1 - c["rho"]) * g
            den = v - a * a + f(c["epsilon"])
        else:
            den = v + f(c["epsilon"])
        inc = (lr * g) / np.sqrt(den)
        if c["momentum"] > 0:
            m = s[1]
            m[:] = f(c["momentum"]) * m + inc
            self.p[i] = p - m
        else:
            self.p[i] = p - inc

    def update_adagrad(self, i, g, lr):
        acc = self.slots[i][0]
        acc[:] = acc + g * g
        self.p[i] = self.p[i] - (lr * g) / np.sqrt(acc + f(self.c["epsilon"]))

    def update_adam(self, i, g, lr):
        c, s = self.c, self.slots[i]
        t = f(self.it + 1)
        b1p = power(f(c["beta_1"]), t)
        b2p = power(f(c["beta_2"]), t)
        m, v = s[0], s[1]
        alpha = lr * np.sqrt(f(1) - b2p) / (f(1) - b1p)
        m[:] = m + (g - m) * f(1 - c["beta_1"])
        v[:] = v + (g * g - v) * f(1 - c["beta_2"])
        if c["amsgrad"]:
            vh = s[2]
            vh[:] = np.maximum(vh, v)
            v = vh
        self.p[i] = self.p[i] - (m * alpha) / (np.sqrt(v) + f(c["epsilon"]))

    update_adamw = update_adam

    def update_nadam(self, i, g, lr):
        c, s = self.c, self.slots[i]
        t, t1 = f(self.it + 1), f(self.it + 2)
        decay = f(0.96)
        b1, b2 = f(c["beta_1"]), f(c["beta_2"])
        u_t = b1 * (f(1.0) - f(0.5) * power(decay, t))
        u_t1 = b1 * (f(1.0) - f(0.5) * power(decay, t1))
        up_t = self.u_product
        up_t1 = up_t * u_t1
        b2p = power(b2, t)
        m, v = s[0], s[1]
        m[:] = m + (g - m) * (f(1) - b1)
        v[:] = v + (g * g - v) * (f(1) - b2)
        m_hat = (u_t1 * m) / (f(1) - up_t1) + ((f(1) - u_t) * g) / (f(1) - up_t)
        v_hat = v / (f(1) - b2p)
        self.p[i] = self.p[i] - (m_hat * lr) / (np.sqrt(v_hat) + f(c["epsilon"]))

    def update_adamax(self, i, g, lr):
        c, s = self.c, self.slots[i]
        t = f(self.it + 1)
        b1p = power(f(c["beta_1"]), t)
        m, u = s[0], s[1]
        m[:] = m + (g - m) * f(1 - c["beta_1"])
        u[:] = np.maximum(f(c["beta_2"]) * u, np.abs(g))
        self.p[i] = self.p[i] - (lr * m) / (
            (f(1) - b1p) * (u + f(c["epsilon"])))

    def update_ftrl(self, i, g, lr):
        c, s, p = self.c, self.slots[i], self.p[i]
        acc, lin = s[0], s[1]
        e = f(-c["learning_rate_power"])
        l2 = f(c["l2_regularization_strength"]) + f(c["beta"]) / (f(2.0) * lr)
        gu = g + f(2 * c["l2_shrinkage_regularization_strength"]) * p
        na = acc + g * g
        lin[:] = lin + (gu - ((power(na, e) - power(acc, e)) / lr) * p)
        q = power(na, e) / lr + f(2) * l2
        l1 = f(c["l1_regularization_strength"])
        lc = np.clip(lin, -l1, l1)
        self.p[i] = (lc - lin) / q
        acc[:] = na


DEFAULTS = {
    "sgd": {"learning_rate": 0.01, "momentum": 0.0, "nesterov": False},
    "rmsprop": {"learning_rate": 0.001, "rho": 0.9, "momentum": 0.0,
                "epsilon": 1e-7, "centered": False},
    "adagrad": {"learning_rate": 0.001, "initial_accumulator_value": 0.1,
                "epsilon": 1e-7},
    "adam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999,
             "epsilon": 1e-7, "amsgrad": False},
    "adamw": {"learning_rate": 0.001, "weight_decay": 0.004, "beta_1": 0.9,
              "beta_2": 0.999, "epsilon": 1e-7, "amsgrad": False},
    "nadam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999,
              "epsilon": 1e-7},
    "adamax": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999,
               "epsilon": 1e-7},
    "ftrl": {"learning_rate": 0.001, "learning_rate_power": -0.5,
             "initial_accumulator_value": 0.1,
             "l1_regularization_strength": 0.0,
             "l2_regularization_strength": 0.0,
             "l2_shrinkage_regularization_strength": 0.0, "beta": 0.0},
}

def sched(cls, **config):
    return {"class_name": cls, "config": config}


SCHEDULES = [
    sched("ExponentialDecay", initial_learning_rate=0.01, decay_steps=10,
          decay_rate=0.9),
    sched("ExponentialDecay", initial_learning_rate=0.01, decay_steps=7,
          decay_rate=0.5, staircase=True),
    sched("InverseTimeDecay", initial_learning_rate=0.02, decay_steps=5,
          decay_rate=0.5),
    sched("InverseTimeDecay", initial_learning_rate=0.02, decay_steps=8,
          decay_rate=1.5, staircase=True),
    sched("PolynomialDecay", initial_learning_rate=0.01, decay_steps=60),
    sched("PolynomialDecay", initial_learning_rate=0.01, decay_steps=30,
          end_learning_rate=0.001, power=2.0, cycle=True),
    sched("CosineDecay", initial_learning_rate=0.01, decay_steps=80,
          alpha=0.1),
    sched("CosineDecay", initial_learning_rate=0.0, decay_steps=60,
          warmup_target=0.02, warmup_steps=20),
    sched("PiecewiseConstantDecay", boundaries=[10, 40, 70],
          values=[0.02, 0.01, 0.005, 0.001]),
]

# Every optimizer with its defaults, then each setting away from them.
CASES = [
    {"type": "sgd"},
    {"type": "sgd", "learning_rate": 0.05, "momentum": 0.9},
    {"type": "sgd", "learning_rate": 0.05, "momentum": 0.9, "nesterov": True},
    {"type": "sgd", "learning_rate": 0.1, "weight_decay": 0.01,
     "exclude_from_weight_decay": ["bias"]},
    {"type": "rmsprop"},
    {"type": "rmsprop", "learning_rate": 0.01, "rho": 0.8, "epsilon": 1e-6},
    {"type": "rmsprop", "momentum": 0.9},
    {"type": "rmsprop", "centered": True},
    {"type": "rmsprop", "momentum": 0.5, "centered": True, "rho": 0.95},
    {"type": "adagrad"},
    {"type": "adagrad", "learning_rate": 0.05, "initial_accumulator_value": 0.5,
     "epsilon": 1e-5},
    {"type": "adagrad", "initial_accumulator_value": 0.0},
    {"type": "adam"},
    {"type": "adam", "learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.99,
     "epsilon": 1e-6},
    {"type": "adam", "amsgrad": True},
    {"type": "adamw"},
    {"type": "adamw", "weight_decay": 0.1, "learning_rate": 0.01,
     "exclude_from_weight_decay": ["bias"]},
    {"type": "adamw", "amsgrad": True, "weight_decay": 0.05},
    {"type": "nadam"},
    {"type": "nadam", "learning_rate": 0.01, "beta_1": 0.95, "beta_2": 0.99},
    {"type": "adamax"},
    {"type": "adamax", "learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.95,
     "epsilon": 1e-5},
    {"type": "ftrl"},
    {"type": "ftrl", "learning_rate": 0.05, "l1_regularization_strength": 0.01,
     "l2_regularization_strength": 0.02},
    {"type": "ftrl", "learning_rate_power": -0.7,
     "l2_shrinkage_regularization_strength": 0.03, "beta": 0.5,
     "initial_accumulator_value": 0.2},
    {"type": "ftrl", "learning_rate": 0.1, "l1_regularization_strength": 0.001,
     "learning_rate_power": 0.0},
]


# clipvalue, with and without a schedule
CASES += [{"type": t, "clipvalue": 0.5} for t in
          ("sgd", "rmsprop", "adagrad", "adam", "nadam", "adamax", "ftrl")]
CASES += [{"type": "adamw", "clipvalue": 1.0, "learning_rate": SCHEDULES[6]},
          {"type": "sgd", "momentum": 0.9, "nesterov": True, "clipvalue": 0.1}]

# Each optimizer with its defaults under each schedule; not Ftrl with a
# warm-up from 0: it divides by the learning rate (NaN, as in Keras).
CASES += [{"type": t, "learning_rate": s} for t in
          ("sgd", "rmsprop", "adagrad", "adam", "adamw", "nadam", "adamax",
           "ftrl") for s in SCHEDULES
          if not (t == "ftrl" and s["config"].get("warmup_target"))]
CASES += [{"type": "sgd", "momentum": 0.9, "learning_rate": s}
          for s in SCHEDULES[:1]]


def rounds_apart(cfg):
    """Where hetps rounds once differently from the transcription (see the
    top): Adam's lr_t, powf at a power other than 1/2."""
    return cfg["type"] in ("adam", "adamw") or (
        cfg["type"] == "ftrl" and cfg.get("learning_rate_power", -0.5) != -0.5)


def check(a, b, what, exact):
    """a (store) against b (numpy), per variable; the largest difference
    in ulps of the variable's scale, or an error message."""
    worst = 0.0
    for v, (lo, hi) in enumerate(((0, KERNEL), (KERNEL, KERNEL + BIAS))):
        x, y = a[..., lo:hi].astype(np.float64), b[..., lo:hi].astype(np.float64)
        scale = np.max(np.abs(y), axis=-1, keepdims=True)
        ulp = np.spacing(scale.astype(F)).astype(np.float64)
        tol = 0 * ulp if exact else 1e-6 * np.abs(y) + 4 * ulp
        diff = np.abs(x - y)
        if not np.all(diff <= tol):
            k = np.unravel_index(np.argmax(diff - tol), diff.shape)
            return None, ("%s: variable %d element %s: store %.9g numpy %.9g"
                          % (what, v, k, x[k], y[k]))
        worst = max(worst, float(np.max(diff / ulp)))
    return worst, None


def run_case(tool, cfg, steps, seed, tmp):
    rng = np.random.default_rng(seed)
    total = KERNEL + BIAS
    init = rng.standard_normal(total).astype(F)
    # gradients of varying size, some elements zero (sparse-like rows)
    grads = (rng.standard_normal((steps, total)) *
             rng.choice([0.0, 0.01, 1.0, 3.0], size=(steps, total),
                        p=[0.05, 0.25, 0.5, 0.2])).astype(F)
    init.tofile(os.path.join(tmp, "init.f32"))
    grads.tofile(os.path.join(tmp, "grads.f32"))
    out = subprocess.run([tool, json.dumps(cfg), tmp, str(KERNEL), str(BIAS),
                          str(steps)], capture_output=True, text=True)
    if out.returncode != 0:
        return None, "optim_check failed: " + out.stderr.strip()
    n_slots = int(out.stdout.split()[1])
    got = np.fromfile(os.path.join(tmp, "params.f32"), dtype=F)
    got = got.reshape(steps, total)
    got_slots = np.fromfile(os.path.join(tmp, "slots.f32"), dtype=F)
    ref = Ref(cfg, [init[:KERNEL], init[KERNEL:]],
              ["dense/kernel", "dense/bias"])
    want = np.empty((steps, total), dtype=F)
    for t in range(steps):
        ref.step([grads[t, :KERNEL], grads[t, KERNEL:]])
        want[t] = np.concatenate(ref.p)
    want_slots = [np.concatenate([ref.slots[0][k], ref.slots[1][k]])
                  for k in range(len(ref.slots[0]))]
    if n_slots != len(want_slots):
        return None, "%d slots, Keras keeps %d" % (n_slots, len(want_slots))
    exact = not rounds_apart(cfg)
    worst, err = check(got, want, "parameters", exact)
    if err:
        return None, err
    if n_slots:
        w2, err = check(got_slots.reshape(n_slots, total),
                        np.stack(want_slots), "slots", exact)
        if err:
            return None, err
        worst = max(worst, w2)
    return worst, None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[-1].strip())
    tool = os.path.join(sys.argv[1], "tools", "optim_check")
    steps = int(sys.argv[2]) if len(sys.argv) == 3 else 100
    failed = 0
    for n, cfg in enumerate(CASES):
        with tempfile.TemporaryDirectory(prefix="hetps-optim-") as tmp:
            worst, err = run_case(tool, cfg, steps, 1000 + n, tmp)
        label = json.dumps(cfg, sort_keys=True)
        if err:
            failed += 1
            print("FAIL %s: %s" % (label, err))
        else:
            print("ok   %s: %d steps, %s" % (
                label, steps, "bit for bit" if worst == 0 else
                "largest difference %.3g ulp of the variable's scale" % worst))
    print("%d of %d cases equal Keras's formulas" % (len(CASES) - failed,
                                                      len(CASES)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
