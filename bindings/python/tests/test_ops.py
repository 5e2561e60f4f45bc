"""Ops against numpy references, their autocast dtypes, and libhpu's checks of their arguments: the
exception of the C status, with the C message, which names the C function and argument."""
import math
import unittest

import numpy as np

import hpu

rng = np.random.default_rng(7)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def close(test, got, want, tol=1e-4):
    np.testing.assert_allclose(got.numpy() if isinstance(got, hpu.Tensor) else got, want, rtol=tol, atol=tol)


class MatrixProducts(unittest.TestCase):
    def test_mm_bmm_matmul_addmm_linear(self):
        a, b = randn(5, 7), randn(7, 3)
        close(self, hpu.mm(hpu.tensor(a), hpu.tensor(b)), a @ b)
        close(self, hpu.tensor(a) @ hpu.tensor(b), a @ b)
        ba, bb = randn(4, 5, 7), randn(4, 7, 3)
        close(self, hpu.bmm(hpu.tensor(ba), hpu.tensor(bb)), ba @ bb)
        close(self, hpu.matmul(hpu.tensor(ba), hpu.tensor(b)), ba @ b)
        v = randn(7)
        close(self, hpu.matmul(hpu.tensor(a), hpu.tensor(v)), a @ v)
        bias = randn(3)
        close(self, hpu.addmm(hpu.tensor(bias), hpu.tensor(a), hpu.tensor(b), beta=0.5, alpha=2.0),
              0.5 * bias + 2.0 * (a @ b))
        x, w = randn(6, 7), randn(3, 7)
        close(self, hpu.linear(hpu.tensor(x), hpu.tensor(w), hpu.tensor(bias)), x @ w.T + bias)
        close(self, hpu.linear(hpu.tensor(x), hpu.tensor(w)), x @ w.T)

    def test_backward(self):
        a, b, g = randn(5, 7), randn(7, 3), randn(5, 3)
        ga, gb = hpu.ops.mm_backward(hpu.tensor(g), hpu.tensor(a), hpu.tensor(b))
        close(self, ga, g @ b.T)
        close(self, gb, a.T @ g)
        x, w, gy = randn(6, 7), randn(3, 7), randn(6, 3)
        gx, gw, gbias = hpu.ops.linear_backward(hpu.tensor(gy), hpu.tensor(x), hpu.tensor(w))
        close(self, gx, gy @ w)
        close(self, gw, gy.T @ x)
        close(self, gbias, gy.sum(0))
        self.assertIsNone(hpu.ops.linear_backward(hpu.tensor(gy), hpu.tensor(x), hpu.tensor(w), bias=False)[2])

    def test_checks(self):
        a = hpu.zeros(2, 3)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.mm(a, hpu.zeros(2, 3))
        self.assertEqual(cm.exception.message,
                         "hpuMm: a is f32[2, 3] and b is f32[2, 3]: the inner sizes differ (3 vs 2)")
        self.assertEqual(str(cm.exception), "HPU_ERROR_INVALID_ARGUMENT: " + cm.exception.message)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.mm(a, hpu.zeros(3))
        self.assertEqual(cm.exception.message, "hpuMm: b is f32[3]: expected 2 dims")
        with self.assertRaises(hpu.UnsupportedError) as cm:
            hpu.mm(hpu.zeros(2, 3, dtype=hpu.int32), hpu.zeros(3, 2))
        self.assertEqual(cm.exception.message, "hpuMm: a is i32[2, 3]: a floating type (f16, bf16, f32, f64) is required")
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.mm(a, hpu.zeros(3, 2, device=1))
        self.assertEqual(cm.exception.message, "hpuMm: b is on device 1 but a is on device 0")
        with self.assertRaises(TypeError) as cm:
            hpu.mm(a, [[1.0]])
        self.assertEqual(str(cm.exception), "hpuMm: b must be an hpu.Tensor, not list")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.linear(hpu.zeros(2, 3), hpu.zeros(4, 3), hpu.zeros(3))
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.bmm(hpu.zeros(2, 3, 4), hpu.zeros(3, 4, 5))


class Elementwise(unittest.TestCase):
    def test_binary_with_broadcasting_and_scalars(self):
        a, b = randn(4, 1, 3), randn(5, 3)
        ta, tb = hpu.tensor(a), hpu.tensor(b)
        close(self, ta + tb, a + b)
        close(self, ta - tb, a - b)
        close(self, ta * tb, a * b)
        close(self, ta / (tb * tb + 1), a / (b * b + 1))
        close(self, ta * 2 + 1, a * 2 + 1)
        close(self, 1 - ta, 1 - a)
        close(self, -ta, -a)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.add(hpu.zeros(2, 3), hpu.zeros(4))

    def test_binary_backward_sums_to_shapes(self):
        a, b, g = randn(4, 1, 3), randn(5, 3), randn(4, 5, 3)
        ga, gb = hpu.ops.mul_backward(hpu.tensor(g), hpu.tensor(a), hpu.tensor(b))
        close(self, ga, (g * b).sum(1, keepdims=True))
        close(self, gb, (g * a).sum(0))

    def test_unary_and_backward(self):
        x = randn(100)
        pos = np.abs(x) + 0.1
        gelu = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
        cases = {"exp": (x, np.exp(x)), "log": (pos, np.log(pos)), "tan": (x * 0.5, np.tan(x * 0.5)),
                 "relu": (x, np.maximum(x, 0)), "gelu": (x, gelu), "tanh": (x, np.tanh(x)),
                 "sigmoid": (x, 1 / (1 + np.exp(-x)))}
        for name, (inp, want) in cases.items():
            close(self, getattr(hpu, name)(hpu.tensor(inp)), want, 1e-4)
        g = randn(100)
        close(self, hpu.ops.tanh_backward(hpu.tensor(g), hpu.tensor(x)), g * (1 - np.tanh(x) ** 2))
        close(self, hpu.ops.relu_backward(hpu.tensor(g), hpu.tensor(x)), g * (x > 0))
        with self.assertRaises(hpu.UnsupportedError):
            hpu.relu(hpu.zeros(3, dtype=hpu.int64))

    def test_add_in_place(self):
        dst = hpu.tensor(np.ones(4, np.float32))
        dst.add_(hpu.tensor(np.arange(4, dtype=np.float32)).to(hpu.bfloat16), alpha=0.5)
        close(self, dst, 1 + 0.5 * np.arange(4))


class Losses(unittest.TestCase):
    def test_softmax_and_log_softmax(self):
        x = randn(4, 10)
        e = np.exp(x - x.max(1, keepdims=True))
        sm = e / e.sum(1, keepdims=True)
        close(self, hpu.softmax(hpu.tensor(x), dim=1), sm)
        close(self, hpu.log_softmax(hpu.tensor(x), -1), np.log(sm))
        g = randn(4, 10)
        out = hpu.softmax(hpu.tensor(x), 1)
        close(self, hpu.ops.softmax_backward(hpu.tensor(g), out, 1), sm * (g - (g * sm).sum(1, keepdims=True)))
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.softmax(hpu.tensor(x), 2)

    def test_cross_entropy_and_nll(self):
        logits, target = randn(8, 5), np.array([0, 1, 2, 3, 4, 0, -100, 2], dtype=np.int64)
        logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        keep = target != -100
        per = -logp[np.arange(8)[keep], target[keep]]
        close(self, hpu.cross_entropy(hpu.tensor(logits), hpu.tensor(target)), per.mean())
        close(self, hpu.cross_entropy(hpu.tensor(logits), hpu.tensor(target), reduction="sum"), per.sum())
        close(self, hpu.nll_loss(hpu.tensor(logp), hpu.tensor(target), reduction="mean"), per.mean())
        grad = hpu.ops.cross_entropy_backward(hpu.tensor(np.float32(1.0)), hpu.tensor(logits), hpu.tensor(target))
        want = np.exp(logp)
        want[np.arange(8)[keep], target[keep]] -= 1
        want[~keep] = 0
        close(self, grad, want / keep.sum())
        with self.assertRaises(hpu.InvalidArgumentError) as cm:  # a floating target holds probabilities
            hpu.cross_entropy(hpu.tensor(logits), hpu.tensor(target.astype(np.float32)))
        self.assertEqual(cm.exception.message, "hpuCrossEntropyLoss: target is f32[8]: expected shape [8, 5] (class "
                                               "probabilities have the input's shape; class indices are i32 or i64)")
        with self.assertRaises(hpu.UnsupportedError) as cm:
            hpu.nll_loss(hpu.tensor(logp), hpu.tensor(target.astype(np.float32)))
        self.assertEqual(cm.exception.message, "hpuNllLoss: target is f32[8]: indices must be i32 or i64")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.cross_entropy(hpu.tensor(logits), hpu.tensor(target[:3]))
        with self.assertRaises(hpu.InvalidArgumentError) as cm:  # a name the binding turns into hpuReduction_t
            hpu.cross_entropy(hpu.tensor(logits), hpu.tensor(target), reduction="avg")
        self.assertEqual(cm.exception.message, "cross_entropy: reduction 'avg' is not 'none', 'mean' or 'sum'")

    def test_layer_norm(self):
        x, w, b = randn(6, 16), randn(16), randn(16)
        mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
        want = (x - mu) / np.sqrt(var + 1e-5) * w + b
        close(self, hpu.layer_norm(hpu.tensor(x), hpu.tensor(w), hpu.tensor(b)), want, 1e-3)
        y, mean, rstd = hpu.layer_norm(hpu.tensor(x), return_stats=True)
        close(self, mean, mu[:, 0])
        close(self, rstd, 1 / np.sqrt(var[:, 0] + 1e-5), 1e-3)
        gx, gw, gb = hpu.ops.layer_norm_backward(hpu.tensor(np.ones_like(x)), hpu.tensor(x), mean, rstd, hpu.tensor(w))
        close(self, gb, np.full(16, 6.0))
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.layer_norm(hpu.tensor(x), hpu.zeros(15))

    def test_class_weighted_losses(self):
        logits, target = randn(8, 5), np.array([0, 1, 2, 3, 4, 0, -100, 2], dtype=np.int64)
        weight = np.array([0.5, 2.0, 1.0, 3.0, 0.25])
        logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        keep = target != -100
        rows, cls = np.arange(8)[keep], target[keep]
        per = -logp[rows, cls] * weight[cls]         # each sample scaled by its class's weight
        none = np.zeros(8)
        none[rows] = per
        x, t = hpu.tensor(logits), hpu.tensor(target)
        for w in (hpu.tensor(weight.astype(np.float32)), hpu.tensor(weight)):  # any floating type
            close(self, hpu.cross_entropy(x, t, weight=w), per.sum() / weight[cls].sum())
            close(self, hpu.cross_entropy(x, t, reduction="sum", weight=w), per.sum())
            close(self, hpu.cross_entropy(x, t, reduction="none", weight=w), none)
            close(self, hpu.nll_loss(hpu.tensor(logp), t, weight=w), per.sum() / weight[cls].sum())
        w = hpu.tensor(weight.astype(np.float32))
        onehot = np.zeros((8, 5))
        onehot[rows, cls] = 1
        scale = np.zeros((8, 1))
        scale[rows, 0] = weight[cls]
        grad = hpu.ops.cross_entropy_backward(hpu.tensor(np.float32(2.0)), x, t, weight=w)
        close(self, grad, 2.0 * (np.exp(logp) - onehot) * scale / weight[cls].sum())
        g = randn(8)
        grad = hpu.ops.cross_entropy_backward(hpu.tensor(g), x, t, reduction="none", weight=w)
        close(self, grad, (np.exp(logp) - onehot) * scale * g[:, None])
        grad = hpu.ops.nll_loss_backward(hpu.tensor(np.float32(1.0)), hpu.tensor(logp), t, reduction="sum", weight=w)
        close(self, grad, -onehot * scale)
        # A weight of 1 everywhere is the unweighted loss.
        close(self, hpu.cross_entropy(x, t, weight=hpu.ones(5)), hpu.cross_entropy(x, t).numpy())

    def test_spatial_and_single_sample_losses(self):
        x, t = randn(3, 4, 5), np.array([[0, 1, 2, 3, -100], [3, 3, 2, 1, 0], [1, 0, 0, 2, 3]], np.int64)
        w = np.array([0.5, 2.0, 1.0, 3.0])
        rows = np.moveaxis(x, 1, -1).reshape(-1, 4)        # [N*d1, C]
        y = t.reshape(-1)
        logp = rows - np.log(np.exp(rows).sum(1, keepdims=True))
        keep = y != -100
        per = np.zeros(15)
        per[keep] = -logp[keep, y[keep]] * w[y[keep]]
        got = hpu.cross_entropy(hpu.tensor(x), hpu.tensor(t), reduction="none", weight=hpu.tensor(w))
        self.assertEqual(got.shape, (3, 5))
        close(self, got, per.reshape(3, 5))
        close(self, hpu.cross_entropy(hpu.tensor(x), hpu.tensor(t), weight=hpu.tensor(w)),
              per.sum() / w[y[keep]].sum())
        g = hpu.ops.cross_entropy_backward(hpu.ones(3, 5), hpu.tensor(x), hpu.tensor(t), reduction="none")
        want = np.exp(logp)
        want[keep, y[keep]] -= 1
        want[~keep] = 0
        close(self, g, np.moveaxis(want.reshape(3, 5, 4), -1, 1))
        one = randn(4)
        lp = one - np.log(np.exp(one).sum())
        close(self, hpu.nll_loss(hpu.tensor(lp), hpu.tensor(np.int64(2))), -lp[2])
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.cross_entropy(hpu.tensor(x), hpu.tensor(t[:, :4]))
        self.assertEqual(cm.exception.message, "hpuCrossEntropyLoss: target is i64[3, 4]: expected shape [3, 5] "
                                               "(one class per sample of input)")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.cross_entropy(hpu.tensor(np.float32(1.0)), hpu.tensor(np.int64(0)))

    def test_label_smoothing(self):
        logits, target = randn(6, 4), np.array([0, 3, -100, 1, 2, 3], np.int64)
        w, e = np.array([0.5, 2.0, 1.0, 3.0]), 0.2
        logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        keep = target != -100
        rows, cls = np.arange(6)[keep], target[keep]
        # torch: (1 - e) * the weighted loss + e / C * sum_j w[j] * -logp[j]; mean over the target weights
        per = (1 - e) * -logp[rows, cls] * w[cls] + e / 4 * (-logp[rows] * w).sum(1)
        x, t, tw = hpu.tensor(logits), hpu.tensor(target), hpu.tensor(w)
        close(self, hpu.cross_entropy(x, t, weight=tw, label_smoothing=e), per.sum() / w[cls].sum())
        close(self, hpu.cross_entropy(x, t, reduction="sum", label_smoothing=e),
              ((1 - e) * -logp[rows, cls] + e / 4 * -logp[rows].sum(1)).sum())
        close(self, hpu.cross_entropy(x, t, weight=tw, label_smoothing=0.0), hpu.cross_entropy(x, t, weight=tw).numpy())
        p = np.exp(logp)
        onehot = np.zeros((6, 4))
        onehot[rows, cls] = 1
        want = np.zeros((6, 4))
        want[rows] = (1 - e) * w[cls][:, None] * (p[rows] - onehot[rows]) + e / 4 * (w.sum() * p[rows] - w)
        grad = hpu.ops.cross_entropy_backward(hpu.tensor(np.float32(1.0)), x, t, weight=tw, label_smoothing=e)
        close(self, grad, want / w[cls].sum())
        for bad in (-0.1, 1.5):
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                hpu.cross_entropy(x, t, label_smoothing=bad)
            self.assertEqual(cm.exception.message, f"hpuCrossEntropyLoss: options->label_smoothing {bad} is not in 0..1")
        with self.assertRaises(TypeError) as cm:
            hpu.cross_entropy(x, t, label_smoothing="0.1")
        self.assertRegex(str(cm.exception), r"^hpuCrossEntropyLoss: options->label_smoothing: .*\bstr\b")  # then ctypes' words

    def test_probability_targets(self):
        # torch's soft targets: sum_j w[j] ((1 - e) p[j] + e / C) -logp[j]; a mean divides by the samples
        w, e = np.array([0.5, 2.0, 1.0, 3.0]), 0.2
        for shape in ((6, 4), (2, 4, 3), (4,)):
            logits, probs = randn(*shape), rng.uniform(0, 1, shape).astype(np.float32)
            axis = 0 if len(shape) == 1 else 1
            logp = logits - np.log(np.exp(logits).sum(axis, keepdims=True))
            wb = w.reshape((4,) + (1,) * (len(shape) - 1 - axis))
            samples = logits.size // 4
            x, t, tw = hpu.tensor(logits), hpu.tensor(probs), hpu.tensor(w)
            for eps in (0.0, e):
                q = (1 - eps) * probs + eps / 4
                per = (wb * q * -logp).sum(axis)
                close(self, hpu.cross_entropy(x, t, reduction="none", weight=tw, label_smoothing=eps), per)
                close(self, hpu.cross_entropy(x, t, weight=tw, label_smoothing=eps, ignore_index=0),
                      per.sum() / samples)
                close(self, hpu.cross_entropy(x, t, reduction="sum", label_smoothing=eps),
                      (q * -logp).sum())
                g = randn(*per.shape)
                grad = hpu.ops.cross_entropy_backward(hpu.tensor(g), x, t, reduction="none", weight=tw,
                                                      label_smoothing=eps)
                wq = wb * q
                close(self, grad, np.expand_dims(g, axis) * (wq.sum(axis, keepdims=True) * np.exp(logp) - wq))
            close(self, hpu.ops.cross_entropy_backward(hpu.tensor(np.float32(1.0)), x, hpu.tensor(probs.astype(np.float64))),
                  (probs.sum(axis, keepdims=True) * np.exp(logp) - probs) / samples)
        x = hpu.tensor(randn(3, 4))
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.ops.cross_entropy_backward(hpu.ones(3), x, hpu.ones(4, 3), reduction="none")
        self.assertEqual(cm.exception.message, "hpuCrossEntropyLossBackward: target is f32[4, 3]: expected shape "
                                               "[3, 4] (class probabilities have the input's shape; class indices "
                                               "are i32 or i64)")
        with self.assertRaises(hpu.UnsupportedError) as cm:
            hpu.cross_entropy(x, hpu.tensor(np.ones((3, 4), np.uint8)))
        self.assertEqual(cm.exception.message, "hpuCrossEntropyLoss: target is u8[3, 4]: indices must be i32 or i64")

    def test_class_weighted_losses_check_their_arguments(self):
        x, t = hpu.tensor(randn(4, 3)), hpu.tensor(np.array([0, 1, 2, 1], dtype=np.int64))
        for op, name in ((hpu.cross_entropy, "hpuCrossEntropyLoss"), (hpu.nll_loss, "hpuNllLoss")):
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                op(x, t, weight=hpu.ones(4))
            self.assertEqual(cm.exception.message,
                             f"{name}: weight is f32[4]: expected shape [3] (one weight per class of input)")
            with self.assertRaises(hpu.UnsupportedError) as cm:
                op(x, t, weight=hpu.tensor(np.array([1, 2, 3])))
            self.assertEqual(cm.exception.message,
                             f"{name}: weight is i64[3]: a floating type (f16, bf16, f32, f64) is required")
            with self.assertRaises(TypeError) as cm:
                op(x, t, weight=[1.0, 2.0, 3.0])
            self.assertEqual(str(cm.exception), f"{name}: weight must be an hpu.Tensor, not list")
            with self.assertRaises(hpu.InvalidArgumentError) as cm:
                op(x, t, weight=hpu.ones(3, device=1))
            self.assertEqual(cm.exception.message, f"{name}: weight is on device 1 but input is on device 0")
            with self.assertRaises(TypeError) as cm:
                op(x, t, ignore_index=1.5, weight=hpu.ones(3))
            self.assertRegex(str(cm.exception), rf"^{name}: options->ignore_index: .*\bfloat\b")
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.ops.cross_entropy_backward(hpu.ones(4), x, t, weight=hpu.ones(3))
        self.assertEqual(cm.exception.message, "hpuCrossEntropyLossBackward: grad_loss is f32[4]: expected "
                                               "shape [] (the forward's loss shape)")

    def test_layer_norm_over_trailing_dims(self):
        x, w, b = randn(3, 4, 5), randn(4, 5), randn(4, 5)
        mu, var = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
        xhat = (x - mu) / np.sqrt(var + 1e-5)
        y, mean, rstd = hpu.layer_norm(hpu.tensor(x), hpu.tensor(w), hpu.tensor(b), normalized_shape=(4, 5),
                                       return_stats=True)
        close(self, y, xhat * w + b, 1e-3)
        self.assertEqual((mean.shape, rstd.shape), ((3,), (3,)))
        close(self, mean, mu[:, 0, 0])
        close(self, rstd, 1 / np.sqrt(var[:, 0, 0] + 1e-5), 1e-3)
        close(self, hpu.layer_norm(hpu.tensor(x), normalized_shape=[3, 4, 5]),
              (x - x.mean()) / np.sqrt(x.var() + 1e-5), 1e-3)
        close(self, hpu.layer_norm(hpu.tensor(x), normalized_shape=5), hpu.layer_norm(hpu.tensor(x)).numpy())
        g = randn(3, 4, 5)
        gx, gw, gb = hpu.ops.layer_norm_backward(hpu.tensor(g), hpu.tensor(x), mean, rstd, hpu.tensor(w))
        gxhat = g * w
        want = (gxhat - gxhat.mean((1, 2), keepdims=True) - xhat * (gxhat * xhat).mean((1, 2), keepdims=True)) \
            / np.sqrt(var + 1e-5)
        close(self, gx, want, 1e-3)
        close(self, gw, (g * xhat).sum(0), 1e-3)
        close(self, gb, g.sum(0), 1e-3)

    def test_layer_norm_over_trailing_dims_checks_its_arguments(self):
        x = hpu.zeros(3, 4, 5)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.layer_norm(x, normalized_shape=(5, 4))
        self.assertEqual(cm.exception.message,
                         "layer_norm: normalized_shape (5, 4) is not a non-empty tail of x's shape (3, 4, 5)")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.layer_norm(x, normalized_shape=(2, 3, 4, 5))
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.layer_norm(x, normalized_shape=())
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.layer_norm(x, hpu.ones(5), normalized_shape=(4, 5))
        self.assertEqual(cm.exception.message,
                         "hpuLayerNorm: weight is f32[5]: expected shape [4, 5] (x's normalized dims)")
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.layer_norm(x, eps=-1.0)
        self.assertEqual(cm.exception.message, "hpuLayerNorm: options->eps -1 is not a finite number >= 0")
        _, mean, rstd = hpu.layer_norm(x, normalized_shape=(4, 5), return_stats=True)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.ops.layer_norm_backward(hpu.zeros(3, 4, 5), x, hpu.zeros(4), rstd)
        self.assertEqual(cm.exception.message, "hpuLayerNormBackward: mean is f32[4]: expected shape [3] (x's shape "
                                               "without the normalized dims)")
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.ops.layer_norm_backward(hpu.zeros(3, 4, 5), x, mean, rstd, hpu.ones(5))
        self.assertEqual(cm.exception.message,
                         "hpuLayerNormBackward: weight is f32[5]: expected shape [4, 5] (x's normalized dims)")

    def test_dropout_and_embedding(self):
        x = hpu.ones(10000)
        out, mask = hpu.dropout(x, p=0.25, return_mask=True)
        o, m = out.numpy(), mask.numpy()
        self.assertIs(mask.dtype, hpu.uint8)
        np.testing.assert_allclose(o, m / 0.75, rtol=1e-6)
        self.assertLess(abs(m.mean() - 0.75), 0.05)
        close(self, hpu.dropout(x, p=0.5, training=False), np.ones(10000))
        close(self, hpu.dropout(hpu.ones(4), p=1.0), np.zeros(4))  # libhpu's range: p in [0, 1]
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.dropout(x, p=1.5)
        self.assertEqual(cm.exception.message, "hpuDropout: p 1.5 is not a probability in [0, 1]")
        weight, idx = randn(10, 4), np.array([[1, 9], [0, 1]], dtype=np.int32)
        close(self, hpu.embedding(hpu.tensor(idx), hpu.tensor(weight)), weight[idx])
        gw = hpu.ops.embedding_backward(hpu.tensor(np.ones((2, 2, 4), np.float32)), hpu.tensor(idx),
                                        hpu.tensor(weight), padding_idx=9)
        want = np.zeros((10, 4), np.float32)
        want[1], want[0] = 2, 1
        close(self, gw, want)


class Backwards(unittest.TestCase):
    """Each backward against its gradient written out in numpy."""

    def test_products(self):
        a, b, g = randn(4, 5, 7), randn(4, 7, 3), randn(4, 5, 3)
        ga, gb = hpu.ops.bmm_backward(hpu.tensor(g), hpu.tensor(a), hpu.tensor(b))
        close(self, ga, g @ b.transpose(0, 2, 1), 1e-3)
        close(self, gb, a.transpose(0, 2, 1) @ g, 1e-3)
        w = randn(7, 3)  # broadcast over a's batch: its gradient sums over the batch
        ga, gw = hpu.ops.matmul_backward(hpu.tensor(g), hpu.tensor(a), hpu.tensor(w))
        close(self, ga, g @ w.T, 1e-3)
        close(self, gw, (a.transpose(0, 2, 1) @ g).sum(0), 1e-3)
        bias, x, y, gy = randn(3), randn(5, 7), randn(7, 3), randn(5, 3)
        gbias, gx, gy_ = hpu.ops.addmm_backward(hpu.tensor(gy), hpu.tensor(bias), hpu.tensor(x), hpu.tensor(y),
                                                beta=0.5, alpha=2.0)
        close(self, gbias, 0.5 * gy.sum(0), 1e-3)
        close(self, gx, 2.0 * gy @ y.T, 1e-3)
        close(self, gy_, 2.0 * x.T @ gy, 1e-3)

    def test_elementwise_with_broadcasting(self):
        a, b, g = randn(3, 4), np.abs(randn(4)) + 0.5, randn(3, 4)
        want = {"add": (g, g.sum(0)), "sub": (g, -g.sum(0)), "mul": (g * b, (g * a).sum(0)),
                "div": (g / b, (-g * a / b ** 2).sum(0))}
        for op, (ga_want, gb_want) in want.items():
            ga, gb = getattr(hpu.ops, op + "_backward")(hpu.tensor(g), hpu.tensor(a), hpu.tensor(b))
            self.assertEqual((ga.shape, gb.shape), ((3, 4), (4,)), op)
            close(self, ga, ga_want, 1e-4)
            close(self, gb, gb_want, 1e-4)

    def test_unary(self):
        x, g = randn(50) * 0.7, randn(50)
        pos = np.abs(x) + 0.1
        erf = np.vectorize(math.erf)
        s = 1 / (1 + np.exp(-x))
        cases = {"exp": (x, g * np.exp(x)), "log": (pos, g / pos), "tan": (x, g * (1 + np.tan(x) ** 2)),
                 "gelu": (x, g * (0.5 * (1 + erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi))),
                 "tanh": (x, g * (1 - np.tanh(x) ** 2)), "sigmoid": (x, g * s * (1 - s)), "relu": (x, g * (x > 0))}
        for op, (inp, want) in cases.items():
            close(self, getattr(hpu.ops, op + "_backward")(hpu.tensor(g), hpu.tensor(inp.astype(np.float32))), want,
                  1e-4)

    def test_log_softmax_dropout_embedding(self):
        x, g = randn(4, 6), randn(4, 6)
        out = hpu.log_softmax(hpu.tensor(x), 1)
        close(self, hpu.ops.log_softmax_backward(hpu.tensor(g), out, 1),
              g - np.exp(out.numpy()) * g.sum(1, keepdims=True))
        self.assertIs(hpu.ops.log_softmax_backward(hpu.tensor(g), out, 1, hpu.bfloat16).dtype, hpu.bfloat16)
        y, mask = hpu.dropout(hpu.tensor(x), p=0.25, return_mask=True)
        gx = hpu.ops.dropout_backward(hpu.tensor(g), mask, 0.25)
        close(self, gx, g * mask.numpy() / 0.75, 1e-5)
        weight, idx = randn(5, 3), np.array([4, 0, 4], dtype=np.int64)
        gw = hpu.ops.embedding_backward(hpu.tensor(np.ones((3, 3), np.float32)), hpu.tensor(idx), hpu.tensor(weight))
        close(self, gw, np.array([[1] * 3, [0] * 3, [0] * 3, [0] * 3, [2] * 3], np.float32))

    def test_reductions_and_cast(self):
        x = randn(3, 4, 5)
        g = randn(3, 5)
        close(self, hpu.ops.sum_backward(hpu.tensor(g), hpu.tensor(x), dim=1), np.broadcast_to(g[:, None], x.shape))
        close(self, hpu.ops.mean_backward(hpu.tensor(g[:, None]), hpu.tensor(x), dim=1, keepdim=True),
              np.broadcast_to(g[:, None] / 4, x.shape))
        close(self, hpu.ops.sum_backward(hpu.tensor(np.float32(2.0)), hpu.tensor(x)), np.full(x.shape, 2.0))
        gb = hpu.tensor(randn(3, 4)).to(hpu.bfloat16)
        gx = hpu.ops.cast_backward(gb, hpu.tensor(randn(3, 4)))
        self.assertIs(gx.dtype, hpu.float32)
        close(self, gx, gb.float().numpy(), 0)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.ops.cast_backward(hpu.zeros(2), hpu.zeros(3))


class Reductions(unittest.TestCase):
    def test_sum_mean_cast(self):
        x = randn(3, 4, 5)
        close(self, hpu.sum(hpu.tensor(x)), x.sum(), 1e-3)
        close(self, hpu.tensor(x).sum(dim=(0, 2)), x.sum((0, 2)), 1e-4)
        close(self, hpu.mean(hpu.tensor(x), dim=-1, keepdim=True), x.mean(-1, keepdims=True))
        s = hpu.sum(hpu.tensor(np.arange(10, dtype=np.int32)))
        self.assertEqual((s.dtype, s.item()), (hpu.int64, 45))
        self.assertIs(hpu.cast(hpu.tensor(x), hpu.bfloat16).dtype, hpu.bfloat16)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.sum(hpu.tensor(x), dim=(0, -3))
        with self.assertRaises(hpu.UnsupportedError):
            hpu.mean(hpu.tensor(np.arange(3)))


class ArgmaxNormScale(unittest.TestCase):
    def test_argmax(self):
        x = randn(4, 6)
        x[2, 1] = x[2, 4] = 9.0  # ties: the first
        t = hpu.tensor(x)
        got = hpu.argmax(t, 1)
        self.assertIs(got.dtype, hpu.int64)
        np.testing.assert_array_equal(got.numpy(), x.argmax(1))
        np.testing.assert_array_equal(t.argmax(dim=0, keepdim=True).numpy(), x.argmax(0)[None])
        self.assertEqual(hpu.argmax(t).item(), x.argmax())
        self.assertEqual(hpu.argmax(t, keepdim=True).shape, (1, 1))
        np.testing.assert_array_equal(hpu.argmax(hpu.tensor(np.array([[3, 7, 7]], np.int32)), -1).numpy(), [1])
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.argmax(t, 2)
        self.assertEqual(cm.exception.message, "hpuArgmax: dim 2 is out of range for 2 dims (-2..1)")
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.argmax(hpu.zeros(3, 0), 1)
        self.assertEqual(cm.exception.message, "hpuArgmax: x is f32[3, 0]: dim 1 is empty, so it has no largest element")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.argmax(hpu.zeros(0))
        with self.assertRaises(hpu.UnsupportedError) as cm:
            hpu.argmax(hpu.zeros(3, dtype=hpu.bool_))
        self.assertEqual(cm.exception.message, "hpuArgmax: x is bool[3]: argmax needs a numeric type")

    def test_squared_norm_and_scale(self):
        a, b = randn(3, 4), randn(5)
        got = hpu.ops.squared_norm([hpu.tensor(a), hpu.tensor(b).to(hpu.bfloat16)])
        self.assertEqual((got.shape, got.dtype), ((), hpu.float32))
        bf = hpu.tensor(b).to(hpu.bfloat16).float().numpy()
        close(self, got, (a.astype(np.float64) ** 2).sum() + (bf.astype(np.float64) ** 2).sum(), 1e-6)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.ops.squared_norm([])
        self.assertEqual(cm.exception.message,
                         "hpuSquaredNorm: count is 0: at least one tensor is needed (it names the device)")
        with self.assertRaises(hpu.UnsupportedError) as cm:
            hpu.ops.squared_norm([hpu.tensor(a), hpu.zeros(2, dtype=hpu.int32)])
        self.assertEqual(cm.exception.message,
                         "hpuSquaredNorm: tensors[1] is i32[2]: a floating type (f16, bf16, f32, f64) is required")
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.ops.squared_norm([hpu.tensor(a), hpu.zeros(2, device=1)])
        t = hpu.tensor(a)
        self.assertIs(t.mul_(0.5), t)
        close(self, t, a * 0.5)
        close(self, hpu.ops.scale_(t, -2.0), -a)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.ops.scale_(hpu.tensor(a).transpose(0, 1), 2.0)
        self.assertEqual(cm.exception.message, "hpuScaleInplace: x is f32[4, 3] with strides [1, 4]: it must be contiguous")
        with self.assertRaises(TypeError):
            t.mul_(hpu.ones(3, 4))


class Autocast(unittest.TestCase):
    def test_output_dtypes_follow_the_op_lists(self):
        a, b = hpu.tensor(randn(4, 4)), hpu.tensor(randn(4, 4))
        with hpu.autocast(dtype=hpu.bfloat16):
            self.assertIs(hpu.mm(a, b).dtype, hpu.bfloat16)                      # lower precision
            self.assertIs(hpu.linear(a, b).dtype, hpu.bfloat16)
            self.assertIs(hpu.tan(a.to(hpu.bfloat16)).dtype, hpu.float32)       # fp32 list
            self.assertIs(hpu.add(a.to(hpu.bfloat16), b).dtype, hpu.float32)    # promote: widest
            self.assertIs(hpu.relu(a).dtype, hpu.float32)                       # not listed
            with hpu.autocast(enabled=False):
                self.assertIs(hpu.mm(a, b).dtype, hpu.float32)
        self.assertIs(hpu.mm(a, b).dtype, hpu.float32)

    def test_bfloat16_matches_a_rounded_reference(self):
        a, b = randn(16, 32), randn(32, 8)
        with hpu.autocast():
            out = hpu.mm(hpu.tensor(a), hpu.tensor(b)).numpy()
        ra = hpu.tensor(a, dtype=hpu.bfloat16).numpy()
        rb = hpu.tensor(b, dtype=hpu.bfloat16).numpy()
        np.testing.assert_allclose(out, ra @ rb, rtol=2e-2, atol=2e-2)

    def test_decorated_function(self):
        @hpu.autocast()
        def step(x, w):
            return hpu.linear(x, w)
        self.assertIs(step(hpu.tensor(randn(2, 3)), hpu.tensor(randn(4, 3))).dtype, hpu.bfloat16)

    def test_op_list_override_changes_ops(self):
        saved = hpu.get_autocast_op_list("lower_precision")
        try:
            hpu.set_autocast_op_list("lower_precision", ["relu"])
            with hpu.autocast():
                self.assertIs(hpu.relu(hpu.tensor(randn(3))).dtype, hpu.bfloat16)
                self.assertIs(hpu.mm(hpu.tensor(randn(2, 2)), hpu.tensor(randn(2, 2))).dtype, hpu.float32)
        finally:
            hpu.set_autocast_op_list("lower_precision", saved)


class Optimizers(unittest.TestCase):
    def test_sgd_with_momentum(self):
        p, g = randn(10), randn(10)
        param, buf = hpu.tensor(p), hpu.zeros(10)
        for step in (1, 2):
            hpu.sgd_step(param, hpu.tensor(g), buf, step=step, lr=0.1, momentum=0.9, weight_decay=0.01)
        d = g + 0.01 * p
        b1 = d
        p1 = p - 0.1 * b1
        d2 = g + 0.01 * p1
        b2 = 0.9 * b1 + d2
        close(self, param, p1 - 0.1 * b2)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.sgd_step(param, hpu.tensor(g), None, step=1, momentum=0.9)
        with self.assertRaises(hpu.InvalidArgumentError):
            hpu.sgd_step(param, hpu.tensor(g), buf, step=0)

    def test_adamw(self):
        p, g = randn(10), randn(10)
        param, m, v = hpu.tensor(p), hpu.zeros(10), hpu.zeros(10)
        hpu.adamw_step(param, hpu.tensor(g).to(hpu.bfloat16), m, v, step=1, lr=1e-2)
        gb = hpu.tensor(g, dtype=hpu.bfloat16).numpy()
        p1 = p * (1 - 1e-2 * 1e-2)
        mh, vh = gb, gb * gb  # bias-corrected first step
        close(self, param, p1 - 1e-2 * mh / (np.sqrt(vh) + 1e-8), 1e-4)
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.adamw_step(param.to(hpu.bfloat16), hpu.tensor(g), m, v, step=1)
        self.assertEqual(cm.exception.message, "hpuAdamwStep: param is bf16[10]: expected contiguous f32")

    def test_adamw_with_copy(self):
        p, g = randn(3000), randn(3000)
        args = [(hpu.tensor(p), hpu.zeros(3000), hpu.zeros(3000)) for _ in range(2)]
        copy = hpu.zeros(3000, dtype=hpu.bfloat16)
        for step in (1, 2):
            hpu.adamw_step(args[0][0], hpu.tensor(g * step), *args[0][1:], step=step, lr=1e-2)
            hpu.adamw_step(args[1][0], hpu.tensor(g * step), *args[1][1:], step=step, lr=1e-2, param_copy=copy)
        for a, b in zip(args[0], args[1]):
            self.assertTrue(np.array_equal(a.numpy(), b.numpy()))
        self.assertTrue(np.array_equal(copy.numpy(), args[0][0].to(hpu.bfloat16).numpy()))
        with self.assertRaises(hpu.InvalidArgumentError) as cm:
            hpu.adamw_step(args[1][0], hpu.tensor(g), *args[1][1:], step=3, param_copy=hpu.zeros(10, dtype=hpu.bfloat16))
        self.assertEqual(cm.exception.message,
                         "hpuAdamwStep: options->param_copy is bf16[10]: expected shape [3000] (param's shape)")
        with self.assertRaises(hpu.UnsupportedError) as cm:
            hpu.adamw_step(args[1][0], hpu.tensor(g), *args[1][1:], step=3, param_copy=hpu.zeros(3000))
        self.assertIn("param_copy is f32[3000]", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
