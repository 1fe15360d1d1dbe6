"""What an exception from a learner's code most likely means, read from torch's message.

The checks run the learner's code and report any exception it raises (``Checker.call``);
for the errors whose cause is usually the same mistake, the report also names it. The
substrings below are looked for in torch's own messages and never shown.
"""

from __future__ import annotations

from ..language import say


def likely_cause(message: str) -> str | None:
    """The likely mistake behind an error ``message``, in the current language, or None."""
    if "in-place" in message or "inplace" in message:
        return say(
            "an in-place operation (x += ..., x.sub_(...), x[...] = ...) on a "
            "tensor that autograd needs, e.g. the input",
            "对 autograd 需要的张量（例如输入）做了原地操作（x += ...、x.sub_(...)、x[...] = ...）",
        )
    if "same device" in message:
        return say(
            "a tensor made inside your code is on another device: create it "
            "with device=x.device, or register it as a buffer so .to(device) "
            "moves it",
            "你的代码里新建的张量在另一个设备上：创建时传入 device=x.device，"
            "或把它注册为缓冲区（register_buffer），让 .to(device) 一并移动它",
        )
    if "same dtype" in message or "scalar type" in message:
        return say(
            "a tensor made inside your code has another dtype: create it with dtype=x.dtype",
            "你的代码里新建的张量 dtype 不对：创建时传入 dtype=x.dtype",
        )
    if "view size is not compatible" in message:
        return say(
            "a .view() of a tensor that is not contiguous (a slice of a fused "
            "projection, or a transposed tensor). If it splits heads: (B, T, D) "
            "becomes (B, T, H, head_dim), then (B, H, T, head_dim) by a transpose; "
            "a .view(B, H, T, head_dim) would mix positions into heads even where "
            "it runs. .reshape() works on any layout",
            "对不连续的张量调用了 .view()（例如融合投影的一个切片，或转置过的张量）。"
            "如果这是在拆分注意力头：应先把 (B, T, D) 变成 (B, T, H, head_dim)，"
            "再用转置得到 (B, H, T, head_dim)；直接 .view(B, H, T, head_dim) "
            "即使不报错，也会把不同位置混进同一个头。.reshape() 对任何内存布局都适用",
        )
    if "does not require grad" in message:
        return say(
            "the output is cut off from autograd (torch.no_grad(), .detach(), "
            ".data, or a round trip through numpy/.item())",
            "输出与 autograd 断开了（torch.no_grad()、.detach()、.data，"
            "或经 numpy/.item() 转了一圈）",
        )
    return None
