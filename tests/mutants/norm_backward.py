"""The wrong and the right implementations that test_mutants_norm_backward.py runs: notebook
03's ``layernorm_backward``. See ``mutants/__init__.py``."""

from __future__ import annotations

import torch

from tfcourse.nn.norms import layernorm_backward


def make_layernorm_backward(mistake=None):
    """Learner-style ``layernorm_backward`` (the formula); ``mistake`` switches on one error."""

    def backward(x, weight, grad_out, eps=1e-5):
        dim = 0 if mistake == "axis_0" else -1
        mean = x.mean(dim=dim, keepdim=True)
        var = x.var(dim=dim, keepdim=True, unbiased=mistake == "unbiased")
        sigma = var.sqrt() + eps if mistake == "eps_outside" else (var + eps).sqrt()
        x_hat = (x - mean) / sigma
        g = grad_out if mistake == "no_weight" else grad_out * weight
        reduce = torch.sum if mistake == "sums" else torch.mean
        grad_x = g
        if mistake not in ("no_mean_terms", "mean_term_dropped"):
            grad_x = grad_x - reduce(g, dim=dim, keepdim=True)
        if mistake not in ("no_mean_terms", "variance_term_dropped"):
            grad_x = grad_x - x_hat * reduce(g * x_hat, dim=dim, keepdim=True)
        grad_x = grad_x / sigma
        D = x.shape[-1]
        grad_weight = (grad_out * (x if mistake == "x_for_x_hat" else x_hat)).reshape(-1, D)
        grad_bias = grad_out.reshape(-1, D)
        if mistake == "unsummed":
            return grad_x, grad_out * x_hat, grad_out
        if mistake == "averaged":
            return grad_x, grad_weight.mean(0), grad_bias.mean(0)
        if mistake == "weight_grad_is_bias_grad":
            return grad_x, grad_bias.sum(0), grad_bias.sum(0)
        if mistake == "autograd":
            x = x.clone().requires_grad_(True)
            y = (x - x.mean(-1, keepdim=True)) / sigma * weight
            (y * grad_out).sum().backward()
            return x.grad, grad_weight.sum(0), grad_bias.sum(0)
        if mistake == "in_place":
            grad_out.mul_(weight)  # g computed into the caller's tensor
            return grad_x, grad_weight.sum(0), grad_bias.sum(0)
        if mistake == "list_of_two":
            return [grad_x, grad_weight.sum(0)]
        if mistake == "scaled_by_sigma_squared":  # an error no known mistake explains
            grad_x = grad_x / sigma
        return grad_x, grad_weight.sum(0), grad_bias.sum(0)

    backward.__name__ = f"layernorm_backward_{mistake}"
    return backward


def chain_rule(x, weight, grad_out, eps=1e-5):
    """Through the variance and the mean step by step, as a graph drawn on paper."""
    D = x.shape[-1]
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(-1, keepdim=True)
    inv = (var + eps) ** -0.5
    x_hat = xc * inv
    d_xhat = grad_out * weight
    d_var = (d_xhat * xc).sum(-1, keepdim=True) * -0.5 * inv**3
    d_xc = d_xhat * inv + d_var * 2 * xc / D
    d_x = d_xc - d_xc.mean(-1, keepdim=True)
    flat = (-1, D)
    return d_x, (grad_out * x_hat).reshape(flat).sum(0), grad_out.reshape(flat).sum(0)


def in_float64(x, weight, grad_out, eps=1e-5):
    """The formula in float64, the results cast back."""
    out = layernorm_backward(x.double(), weight.double(), grad_out.double(), eps)
    return tuple(t.to(x.dtype) for t in out)


MUTANTS = [
    ("ln-backward-no-mean-terms", make_layernorm_backward("no_mean_terms"), "both mean terms"),
    (
        "ln-backward-variance-term-dropped",
        make_layernorm_backward("variance_term_dropped"),
        "the variance's gradient dropped",
    ),
    (
        "ln-backward-mean-term-dropped",
        make_layernorm_backward("mean_term_dropped"),
        "the mean's gradient dropped",
    ),
    ("ln-backward-axis-0", make_layernorm_backward("axis_0"), "the wrong axis"),
    ("ln-backward-sums-for-means", make_layernorm_backward("sums"), "sums where the formula"),
    ("ln-backward-weight-left-out", make_layernorm_backward("no_weight"), "the weight is left"),
    ("ln-backward-unbiased", make_layernorm_backward("unbiased"), "the variance is unbiased"),
    ("ln-backward-eps-outside", make_layernorm_backward("eps_outside"), "eps is added outside"),
    ("ln-backward-unsummed", make_layernorm_backward("unsummed"), "not summed over the tokens"),
    ("ln-backward-averaged", make_layernorm_backward("averaged"), "averaged over the tokens"),
    ("ln-backward-x-for-x-hat", make_layernorm_backward("x_for_x_hat"), "x where x_hat belongs"),
    (
        "ln-backward-weight-grad-is-bias-grad",
        make_layernorm_backward("weight_grad_is_bias_grad"),
        "x_hat left out",
    ),
    ("ln-backward-autograd", make_layernorm_backward("autograd"), "autograd was used"),
    ("ln-backward-in-place", make_layernorm_backward("in_place"), "modified its input grad_out"),
    ("ln-backward-two-results", make_layernorm_backward("list_of_two"), "a tuple of three"),
    (
        "ln-backward-unknown",
        make_layernorm_backward("scaled_by_sigma_squared"),
        "differs from the reference",
    ),
]

ALTERNATIVES = [
    ("ln-backward-learner-base", make_layernorm_backward(None)),
    ("ln-backward-chain-rule", chain_rule),
    ("ln-backward-float64", in_float64),
    ("ln-backward-reference", layernorm_backward),
]
