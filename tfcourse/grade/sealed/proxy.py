"""The grader's side of a worker: stand-ins that look like the learner's code to a check.

A check such as ``check_rmsnorm(cls)`` runs unchanged in the grader's own process. It is
handed a stand-in for the learner's class: calling it builds the learner's module in the
worker and returns a ``RemoteModule``, an ``nn.Module`` whose parameters and buffers
mirror the learner's names, shapes and ties. The check loads weights into the mirror as
usual (``load_state_dict(strict=True)``); a forward call sends the mirror's parameters
and the inputs to the worker and returns the learner's outputs; a backward pass through
them asks the worker for the gradients of the inputs and parameters. So the check's
comparison and diagnosis happen here, and the worker only ever computes.
"""

from __future__ import annotations

import contextlib
import inspect

import torch
from torch import nn

from ...language import say
from . import protocol
from .channel import Channel, SealedUnsupported, broken

# What one module may declare: far above any check's module, far below the grader's memory.
MAX_ELEMENTS = 2**26


class Worker(Channel):
    """A worker as the checks see it: ``Channel`` and the stand-ins' requests."""

    # -- what the stand-ins use --------------------------------------------------------

    def stand_in(self, node: dict):
        """A local object for a worker-side handle."""
        if node.get("kind") == "module":
            return RemoteModule(self, node)
        if node.get("kind") in ("class", "function"):
            return RemoteCallable(self, node)
        return RemoteObject(self, node)

    def evaluate(self, expression: str):
        """The value of a check call's argument (``RMSNorm``, ``count(stack)``), evaluated in
        the learner's namespace in the worker: a stand-in, or plain data."""
        reply, tensors = self.request({"op": "evaluate", "expression": expression})
        return protocol.decode(reply["value"], tensors, handle=self.stand_in, requires_grad=False)

    def call(self, target: dict, args: tuple, kwargs: dict, module: RemoteModule | None = None):
        encoder = protocol.Encoder()
        by_value: list[nn.Module] = []  # the check's own modules, sent as copies
        encoder.handle = lambda value: _send_handle(value, encoder, by_value)
        header = {"op": "call", "target": target, "args": encoder(args), "kwargs": encoder(kwargs)}
        tensors_in = list(protocol.tensors_of((args, kwargs)))
        leaves = [t for t in tensors_in if t.requires_grad and t.is_floating_point()]
        if module is not None:
            params = dict(module.named_parameters())  # tied parameters once
            header.update(
                params=encoder(params),
                training=module.training,
                buffers=encoder(dict(module.named_buffers())),
            )
            leaves += [p for p in params.values() if p.requires_grad]
            tensors_in += list(params.values())
        device = next((t.device for t in tensors_in), torch.device("cpu"))
        header["device"] = str(device)
        # A copy of the check's module may need autograd inside the learner's code (a
        # gradient probe runs backward on it) even when nothing here needs a gradient.
        header["grad"] = torch.is_grad_enabled() and bool(leaves or by_value)
        reply, blob = self.request(header, encoder.tensors)
        # An optimizer the learner's code returns over one of the modules sent comes back
        # rebuilt over that module here (configure_optimizer: its groups are the answer).
        result = protocol.decode(
            reply["result"],
            blob,
            device=device,
            handle=self.stand_in,
            requires_grad=False,
            optimizers_over=by_value,
        )
        _copy_back(
            args,
            kwargs,
            protocol.decode(
                reply["inputs_after"],
                blob,
                device=device,
                handle=lambda node: None,
                requires_grad=False,
            ),
        )
        modules_after = reply.get("modules_after", [])
        if not isinstance(modules_after, list) or len(modules_after) != len(by_value):
            raise broken("the modules' state after the call", "调用之后各模块的状态")
        for local, after in zip(by_value, modules_after, strict=True):
            _mirror_module_state(local, after)
        if "graph" not in reply:
            return result
        produced = list(protocol.tensors_of(result))
        chosen = reply.get("differentiable")
        if (
            reply.get("leaves") != len(leaves)
            or not isinstance(reply["graph"], int)
            or not (
                isinstance(chosen, list)
                and chosen == sorted(set(chosen))
                and all(isinstance(i, int) and 0 <= i < len(produced) for i in chosen)
            )
        ):
            raise broken("what needs a gradient", "哪些量需要梯度")
        differentiable = [produced[i] for i in chosen]
        linked = _RemoteGradient.apply(self, reply["graph"], differentiable, *leaves)
        return _replace(result, dict(zip(chosen, linked, strict=True)))

    def backward(self, graph: int, grads, leaves) -> list[torch.Tensor | None]:
        """The gradients of ``leaves`` for ``grads`` of the graph's outputs, from the worker;
        each checked against its leaf's shape."""
        blob = {
            f"g{i}": g.detach().to("cpu").contiguous() for i, g in enumerate(grads) if g is not None
        }
        reply, tensors = self.request({"op": "backward", "graph": graph}, blob)
        keys = reply.get("grads")
        if not (isinstance(keys, list) and len(keys) == len(leaves)):
            raise broken("the number of gradients", "梯度的个数")
        found: list[torch.Tensor | None] = []
        for key, leaf in zip(keys, leaves, strict=True):
            if key is None:  # no gradient flows to this leaf
                found.append(None)
                continue
            grad = tensors.get(key) if isinstance(key, str) else None
            if grad is None or grad.shape != leaf.shape or not grad.is_floating_point():
                raise broken("a gradient's shape or type", "某个梯度的形状或类型")
            found.append(grad)
        return found


def _send_handle(value, encoder, by_value: list[nn.Module]) -> dict:
    if isinstance(value, (RemoteModule, RemoteCallable, RemoteObject)):
        return value._node
    if isinstance(value, nn.Module):
        by_value.append(value)
        return _module_by_value(value, encoder)
    if isinstance(value, torch.optim.Optimizer):
        return _optimizer_by_value(value, encoder, by_value)
    raise SealedUnsupported(
        say(
            f"cannot pass a {type(value).__name__} to the learner's code in the sealed worker",
            f"无法把 {type(value).__name__} 传给隔离进程中学员的代码",
        )
    )


def _module_by_value(module: nn.Module, encoder) -> dict:
    """A module of the check's own (an ``nn.Linear``, the reference attention) sent as its
    class, constructor arguments and weights, rebuilt in the worker. The arguments are read
    back from the attributes the constructor stored; a rebuild that does not reproduce the
    module here is refused (``SealedUnsupported``: the exercise cannot be judged sealed and
    earns nothing)."""
    cls = type(module)
    if not cls.__module__.startswith(("torch.nn.", "tfcourse.")):
        raise SealedUnsupported(
            say(
                f"cannot send a {cls.__name__} to the sealed worker",
                f"无法把 {cls.__name__} 发送到隔离进程",
            )
        )
    state = module.state_dict()
    # A module on the meta device (shapes, no storage: GPT-2 small counted without 124 M
    # parameters) crosses as its class and arguments only and is rebuilt on meta there.
    meta = any(t.is_meta for t in state.values())
    if meta and not all(t.is_meta for t in state.values()):
        raise SealedUnsupported(
            say(
                f"cannot send a {cls.__name__} that is partly on the meta device",
                f"无法发送部分位于 meta 设备上的 {cls.__name__}",
            )
        )
    init = {}
    for name, parameter in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or name in (
            "device",
            "dtype",
        ):
            continue
        if hasattr(module, name):
            value = getattr(module, name)
            init[name] = (
                (value is not None)
                if name == "bias" and (value is None or isinstance(value, torch.Tensor))
                else value
            )
        elif name == "bias":
            init[name] = any(key.endswith("bias") for key in state)
    try:
        with torch.device("meta") if meta else contextlib.nullcontext():
            twin = cls(**init)
        twin.load_state_dict(state, strict=True)
    except Exception as error:  # noqa: BLE001 - any failure: not rebuildable
        raise SealedUnsupported(
            say(
                f"cannot rebuild a {cls.__name__} in the sealed worker ({type(error).__name__})",
                f"无法在隔离进程中重建 {cls.__name__}（{type(error).__name__}）",
            )
        ) from None
    if meta:
        return {
            "$module": f"{cls.__module__}:{cls.__qualname__}",
            "init": encoder(init),
            "meta": True,
            "training": module.training,
        }
    grads = {name: p.grad for name, p in module.named_parameters() if p.grad is not None}
    # Frozen parameters stay frozen in the copy: which ones train is part of some answers.
    frozen = [name for name, p in module.named_parameters() if not p.requires_grad]
    return {
        "$module": f"{cls.__module__}:{cls.__qualname__}",
        "init": encoder(init),
        "state": encoder(dict(state)),
        "grads": encoder(grads),
        "frozen": frozen,
        "training": module.training,
        "dtype": str(next(iter(state.values())).dtype).removeprefix("torch.") if state else None,
    }


def _optimizer_by_value(optimizer: torch.optim.Optimizer, encoder, by_value) -> dict:
    """A fresh optimizer of the check's own over a module sent before it in the same call
    (``train_loop(model, optimizer, ...)``): its class and, per param group, the names of
    its parameters in that module and its settings; rebuilt in the worker over the copy."""
    cls = type(optimizer)
    if protocol.OPTIMIZERS.get(cls.__name__) is not cls or optimizer.state:
        raise SealedUnsupported(
            say(
                f"cannot send a {cls.__name__} to the sealed worker (only a fresh AdamW, Adam "
                f"or SGD, without state)",
                f"无法把 {cls.__name__} 发送到隔离进程"
                f"（只能发送没有状态的全新 AdamW、Adam 或 SGD）",
            )
        )
    for index, module in enumerate(by_value):
        names = {id(p): name for name, p in module.named_parameters()}
        groups = [
            {
                "params": [names.get(id(p)) for p in group["params"]],
                "settings": {k: v for k, v in group.items() if k in optimizer.defaults},
            }
            for group in optimizer.param_groups
        ]
        if all(None not in group["params"] for group in groups):
            return {"$optimizer": cls.__name__, "module": index, "groups": encoder(groups)}
    raise SealedUnsupported(
        say(
            "cannot send an optimizer whose parameters are not those of a module sent before it",
            "无法发送一个参数不属于先前发送的模块的优化器",
        )
    )


_HOOK_KINDS = dict(
    zip(
        protocol.HOOK_KINDS,
        (
            lambda m: m.register_forward_hook(lambda *a: None),
            lambda m: m.register_forward_pre_hook(lambda *a: None),
            lambda m: m.register_full_backward_hook(lambda *a: None),
            lambda m: m.register_full_backward_pre_hook(lambda *a: None),
        ),
        strict=True,
    )
)


def _mirror_module_state(module: nn.Module, after: dict) -> None:
    """What the learner's code left on the copy of a check's module, shown on the module
    itself: its mode, and a (no-op) hook wherever the copy kept one, so a check that
    looks for leftover hooks sees them here."""
    module.train(bool(after.get("training", module.training)))
    submodules = dict(module.named_modules())
    for name, kind in after.get("hooks", []):
        if name in submodules and kind in _HOOK_KINDS and not getattr(submodules[name], kind):
            _HOOK_KINDS[kind](submodules[name])


def _replace(value, mapping: dict[int, torch.Tensor], counter=None):
    """``value`` with its i-th tensor (depth first) replaced by ``mapping[i]``."""
    counter = counter if counter is not None else [0]
    if isinstance(value, torch.Tensor):
        index = counter[0]
        counter[0] += 1
        return mapping.get(index, value)
    if isinstance(value, (list, tuple)):
        items = [_replace(item, mapping, counter) for item in value]
        return type(value)(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {key: _replace(item, mapping, counter) for key, item in value.items()}
    return value


def _copy_back(args, kwargs, after) -> None:
    """An input the learner's code modified in place is modified here too."""
    # A list the learner's code grew in place holds more tensors after the call: those it
    # was given are compared in order, the new ones have nothing here to update.
    after_tensors = protocol.tensors_of(after)
    for mine, theirs in zip(protocol.tensors_of((args, kwargs)), after_tensors, strict=False):
        if (
            mine.shape == theirs.shape
            and not mine.requires_grad
            and not torch.equal(mine, theirs.to(mine.dtype))
        ):
            with torch.no_grad():
                mine.copy_(theirs)


class _RemoteGradient(torch.autograd.Function):
    """Ties the learner's outputs to the local inputs: backward asks the worker."""

    @staticmethod
    def forward(ctx, worker, graph, outputs, *leaves):
        ctx.worker, ctx.graph, ctx.leaves = worker, graph, leaves
        return tuple(output.clone() for output in outputs)

    @staticmethod
    def backward(ctx, *grads):
        found = ctx.worker.backward(ctx.graph, grads, ctx.leaves)
        return (
            None,
            None,
            None,
            *(
                g.to(leaf.device, leaf.dtype) if g is not None else None
                for g, leaf in zip(found, ctx.leaves, strict=True)
            ),
        )


class RemoteCallable:
    """The learner's function or class; calling it runs it in the worker."""

    def __init__(self, worker: Worker, node: dict):
        self._worker, self._node = worker, node
        self.__name__ = str(node.get("name", "function"))

    def __call__(self, *args, **kwargs):
        return self._worker.call(self._node, args, kwargs)

    def __repr__(self):
        return f"<{self.__name__} (learner's code, in the sealed worker)>"


class RemoteObject(RemoteCallable):
    """Any other object of the learner's: attributes are fetched from the worker."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        reply, tensors = self._worker.request({"op": "getattr", "target": self._node, "name": name})
        return protocol.decode(
            reply["value"], tensors, handle=self._worker.stand_in, requires_grad=False
        )


class RemoteModule(nn.Module):
    """The learner's module: a local mirror of its parameters and buffers; calls go to the
    worker with the mirror's current values."""

    def __init__(self, worker: Worker, node: dict):
        super().__init__()
        self._worker, self._node, self._ready = worker, node, False
        self.__name__ = str(node.get("name", "Module"))
        reply, tensors = worker.request({"op": "describe", "target": node})
        tied: dict[int, nn.Parameter] = {}
        # Nothing is allocated from what the worker declares: every parameter arrives as a
        # tensor in the (size-capped) blob, and its declared shape and dtype must match it.
        if sum(t.numel() for t in tensors.values()) > MAX_ELEMENTS:
            raise broken(
                f"a module of more than {MAX_ELEMENTS} numbers", f"模块的数值超过 {MAX_ELEMENTS} 个"
            )
        for spec in reply.get("params", []):
            value = tensors.get(spec.get("value", ""), None)
            if (
                value is None
                or list(value.shape) != spec.get("shape")
                or not isinstance(spec.get("name"), str)
                or not value.is_floating_point()
                or not isinstance(spec.get("tie"), int)
            ):
                raise broken("a parameter's name, shape or type", "某个参数的名字、形状或类型")
            if spec["tie"] not in tied:
                tied[spec["tie"]] = nn.Parameter(
                    value, requires_grad=bool(spec.get("requires_grad"))
                )
            owner, leaf = self._owner(spec["name"])
            owner.register_parameter(leaf, tied[spec["tie"]])
        buffers, transient = reply.get("buffers"), reply.get("transient", [])
        if not (
            isinstance(buffers, dict)
            and isinstance(transient, list)
            and all(isinstance(name, str) and name in buffers for name in transient)
        ):
            raise broken("the module's buffers", "模块的缓冲区")
        for name, node_value in buffers.items():
            owner, leaf = self._owner(name)
            owner.register_buffer(
                leaf,
                protocol.decode(node_value, tensors, requires_grad=False),
                persistent=name not in transient,  # the learner's state_dict, key for key
            )
        self.train(reply["training"])
        self._ready = True  # from now on, unknown attributes are the learner's

    def _owner(self, dotted: str) -> tuple[nn.Module, str]:
        *path, leaf = dotted.split(".")
        owner: nn.Module = self
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, nn.Module())
            owner = owner.get_submodule(part)
        return owner, leaf

    def forward(self, *args, **kwargs):
        return self._worker.call(self._node, args, kwargs, module=self)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or not self.__dict__.get("_ready"):
                raise
        reply, tensors = self._worker.request({"op": "getattr", "target": self._node, "name": name})
        value = protocol.decode(
            reply["value"], tensors, handle=self._worker.stand_in, requires_grad=False
        )
        if isinstance(value, RemoteCallable) and not isinstance(value, RemoteModule):
            raise SealedUnsupported(
                say(
                    f"the check calls {name!r} on your module, which the "
                    f"sealed worker cannot forward yet",
                    f"检查调用了你的模块的 {name!r}，隔离进程目前还无法转发这种调用",
                )
            )
        return value
