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

With --shard, the same through two live hetps-ps processes and one worker
(tools/optim_check shard: the worker's client, sync or async), over MATRIX:
every optimizer, under a constant rate and each schedule, with no
clipping and each clipping (clipnorm and global_clipnorm done by the
worker before the push, as the trainer does). Norm clipping sums squares
in double where Keras sums float32 in no fixed order: those cases, too,
are held to the tolerance rather than to the bit.
"""
import concurrent.futures
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile

import numpy as np

F = np.float32
JOBS = 3                        # --shard: cases at a time, 3 ports each
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


def clip_norm(g, clipnorm):
    """keras/src/optimizers/base_optimizer.py _clip_by_norm: g scaled to
    an L2 norm of at most clipnorm."""
    l2sum = F(np.sum(np.square(g.astype(np.float64))))
    if not l2sum > 0:
        return g
    return (g * f(clipnorm)) / np.maximum(np.sqrt(l2sum), f(clipnorm))


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
        # base_optimizer._clip_gradients: clipnorm per variable
        # (_clip_by_norm), global_clipnorm over all (clip_by_global_norm),
        # clipvalue elementwise; the sums of squares in double (Keras's
        # float32 reduction has no fixed order)
        cn, gcn = self.c.get("clipnorm"), self.c.get("global_clipnorm")
        if cn:
            grads = [clip_norm(g, cn) for g in grads]
        if gcn:
            n = np.sqrt(F(sum(np.sum(np.square(g.astype(np.float64)))
                              for g in grads)))
            scale = f(gcn) * np.minimum(f(1.0) / n, f(1.0) / f(gcn))
            grads = [g * scale for g in grads]
        cv = self.c.get("clipvalue")
        if cv:
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


# clipnorm and global_clipnorm (the worker's, tools/optim_check shard only)
CLIPS = [{}, {"clipvalue": 0.5}, {"clipnorm": 5.0}, {"global_clipnorm": 10.0}]

# What the shards must show: every optimizer with its defaults, under a
# constant rate and each schedule, with no clipping and each clipping
# (not Ftrl with a warm-up from 0, as above).
MATRIX = [dict({"type": t}, **({"learning_rate": s} if s else {}), **c)
          for t in ("sgd", "rmsprop", "adagrad", "adam", "adamw", "nadam",
                    "adamax", "ftrl")
          for s in [None] + SCHEDULES
          if not (t == "ftrl" and s and s["config"].get("warmup_target"))
          for c in CLIPS]


def rounds_apart(cfg):
    """Where hetps rounds once differently from the transcription (see the
    top): Adam's lr_t, powf at a power other than 1/2."""
    return cfg["type"] in ("adam", "adamw") or "clipnorm" in cfg or \
        "global_clipnorm" in cfg or (
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


def store_run(tool, cfg, steps, tmp):
    """The case on a shard store (tools/optim_check): (params, slots,
    n_slots) or an error."""
    out = subprocess.run([tool, json.dumps(cfg), tmp, str(KERNEL), str(BIAS),
                          str(steps)], capture_output=True, text=True)
    if out.returncode != 0:
        return None, "optim_check failed: " + out.stderr.strip()
    return read_run(tmp, out.stdout), None


def read_run(tmp, stdout):
    n_slots = int(stdout.split()[1])
    got = np.fromfile(os.path.join(tmp, "params.f32"), dtype=F)
    got_slots = np.fromfile(os.path.join(tmp, "slots.f32"), dtype=F)
    return got, got_slots, n_slots


def die_with_parent():
    """In a child, before exec: SIGTERM when the thread that started it
    ends (prctl PR_SET_PDEATHSIG), so that a test stopped by its pid
    leaves no shard behind."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


class Shards:
    """The case through two live hetps-ps processes (tools/optim_check shard):
    a fresh cluster of two shards and one worker in `mode` on ports
    port..port+2, started for the case and stopped before the slots are
    read from their stores."""

    def __init__(self, build, bin_dir, mode, port):
        self.tool = os.path.join(build, "tools", "optim_check")
        self.ps = os.path.join(bin_dir, "hetps-ps")
        self.mode, self.port = mode, port
        self.slots = queue.Queue()          # each case's ports
        for k in range(JOBS):
            self.slots.put(k)

    def __call__(self, tool, cfg, steps, tmp):
        slot = self.slots.get()
        try:
            return self.case(cfg, steps, tmp, self.port + 3 * slot)
        finally:
            self.slots.put(slot)

    def case(self, cfg, steps, tmp, port):
        addr = ["127.0.0.1:%d" % (port + k) for k in range(3)]
        cluster = os.path.join(tmp, "cluster.json")
        with open(cluster, "w") as fh:
            json.dump({"cluster": {"ps": addr[:2], "worker": addr[2:]},
                       "hetps": {"mode": self.mode}}, fh)
        data = os.path.join(tmp, "data")
        procs = []
        try:
            for j in range(2):
                log = open(os.path.join(tmp, "ps%d.log" % j), "w")
                procs.append(subprocess.Popen(
                    [self.ps, "--cluster", cluster, "--task", "ps:%d" % j,
                     "--data-dir", os.path.join(data, "ps-%d" % j)],
                    stdout=log, stderr=subprocess.STDOUT,
                    preexec_fn=die_with_parent))
                log.close()
            out = subprocess.run([self.tool, "shard", cluster, json.dumps(cfg),
                                  tmp, str(steps)], capture_output=True,
                                 text=True, timeout=120,
                                 preexec_fn=die_with_parent)
            if out.returncode != 0:
                return None, "optim_check shard failed: %s%s" % (
                    out.stderr.strip(), self.logs(tmp))
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if any(p.returncode != 0 for p in procs):
            return None, "a shard exited with %s%s" % (
                [p.returncode for p in procs], self.logs(tmp))
        out = subprocess.run([self.tool, "slots", cluster, data, tmp],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            return None, "optim_check slots failed: " + out.stderr.strip()
        return read_run(tmp, out.stdout), None

    @staticmethod
    def logs(tmp):
        text = ""
        for j in range(2):
            with open(os.path.join(tmp, "ps%d.log" % j)) as fh:
                text += "\nps:%d: %s" % (j, fh.read()[-2000:])
        return text


def run_case(runner, tool, cfg, steps, seed, tmp):
    rng = np.random.default_rng(seed)
    total = KERNEL + BIAS
    init = rng.standard_normal(total).astype(F)
    # gradients of varying size, some elements zero (sparse-like rows)
    grads = (rng.standard_normal((steps, total)) *
             rng.choice([0.0, 0.01, 1.0, 3.0], size=(steps, total),
                        p=[0.05, 0.25, 0.5, 0.2])).astype(F)
    init.tofile(os.path.join(tmp, "init.f32"))
    grads.tofile(os.path.join(tmp, "grads.f32"))
    res, err = runner(tool, cfg, steps, tmp)
    if err:
        return None, None, err
    got, got_slots, n_slots = res
    got = got.reshape(steps, total)
    ref = Ref(cfg, [init[:KERNEL], init[KERNEL:]],
              ["dense/kernel", "dense/bias"])
    want = np.empty((steps, total), dtype=F)
    for t in range(steps):
        ref.step([grads[t, :KERNEL], grads[t, KERNEL:]])
        want[t] = np.concatenate(ref.p)
    want_slots = [np.concatenate([ref.slots[0][k], ref.slots[1][k]])
                  for k in range(len(ref.slots[0]))]
    if n_slots != len(want_slots):
        return None, None, "%d slots, Keras keeps %d" % (n_slots,
                                                         len(want_slots))
    exact = not rounds_apart(cfg)
    worst, err = check(got, want, "parameters", exact)
    if err:
        return None, None, err
    rel = relative(got, want)
    if n_slots:
        w2, err = check(got_slots.reshape(n_slots, total),
                        np.stack(want_slots), "slots", exact)
        if err:
            return None, None, err
        worst = max(worst, w2)
        rel = max(rel, relative(got_slots.reshape(n_slots, total),
                                np.stack(want_slots)))
    return worst, rel, None


def relative(a, b):
    """The largest |a - b| over the largest |b| of the same variable and
    row (a step's parameters, a slot): the difference as a fraction of the
    variable's scale (elementwise, an element near 0 that differs by an
    ulp of its operands reads as a large fraction of itself)."""
    worst = 0.0
    for lo, hi in ((0, KERNEL), (KERNEL, KERNEL + BIAS)):
        x, y = a[..., lo:hi].astype(np.float64), b[..., lo:hi].astype(np.float64)
        scale = np.max(np.abs(y), axis=-1, keepdims=True)
        scale[scale == 0] = 1.0
        worst = max(worst, float(np.max(np.abs(x - y) / scale)))
    return worst


USAGE = """Usage: optim_ref.py BUILD_DIR [STEPS]
       optim_ref.py --shard sync|async BUILD_DIR BIN_DIR PORT [STEPS]
The first runs CASES on a shard store (tools/optim_check); the second
MATRIX through two live hetps-ps of BIN_DIR in that mode, one worker
(tools/optim_check shard), JOBS cases at a time on ports PORT..PORT+3*JOBS-1. Exit 0 when every case passes."""


def main():
    args = sys.argv[1:]
    if args[:1] == ["--shard"] and len(args) in (5, 6) and \
            args[1] in ("sync", "async"):
        runner = Shards(args[2], args[3], args[1], int(args[4]))
        tool, cases = None, MATRIX
        steps = int(args[5]) if len(args) == 6 else 100
        where = "through two live shards, %s, one worker" % args[1]
    elif len(args) in (1, 2) and not args[0].startswith("-"):
        runner, cases = store_run, CASES
        tool = os.path.join(args[0], "tools", "optim_check")
        steps = int(args[1]) if len(args) == 2 else 100
        where = "through a shard store"
    else:
        sys.exit(USAGE)
    failed, worst_rel, worst_ulp = 0, 0.0, 0.0

    def one(n):
        with tempfile.TemporaryDirectory(prefix="hetps-optim-") as tmp:
            return run_case(runner, tool, cases[n], steps, 1000 + n, tmp)
    # Live shards spend most of a case starting and stopping: JOBS cases
    # at a time, each on its own ports.
    with concurrent.futures.ThreadPoolExecutor(JOBS if tool is None
                                               else 1) as pool:
        results = pool.map(one, range(len(cases)))
        for cfg, (worst, rel, err) in zip(cases, results):
            label = json.dumps(cfg, sort_keys=True)
            if err:
                failed += 1
                print("FAIL %s: %s" % (label, err))
                continue
            worst_rel, worst_ulp = max(worst_rel, rel), max(worst_ulp, worst)
            print("ok   %s: %d steps, %s" % (
                label, steps, "bit for bit" if worst == 0 else
                "largest difference %.3g ulp of the variable's scale, "
                "%.3g of it" % (worst, rel)))
            sys.stdout.flush()
    print("%d of %d cases equal Keras's formulas %s (%d steps each; largest "
          "difference %.3g ulp, %.3g of the variable's largest value)"
          % (len(cases) - failed, len(cases), where, steps, worst_ulp,
             worst_rel))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
