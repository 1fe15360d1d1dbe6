"""The explorers: they build, redraw in place, cache, and carry a static PNG fallback."""

import base64

import pytest
import torch

import tfcourse as tc
from tfcourse.lab import plots, widgets

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _only_picture(explorer) -> bytes:
    """The PNG in the explorer's Output, asserting it holds exactly one output."""
    outputs = explorer.output.outputs
    assert len(outputs) == 1, f"expected one output in the Output widget, got {len(outputs)}"
    assert outputs[0]["output_type"] == "display_data"
    return base64.b64decode(outputs[0]["data"]["image/png"])


def test_lazy_submodule_access():
    assert tc.widgets is widgets and tc.plots is plots


def test_attention_explorer_builds_with_controls_and_picture():
    explorer = widgets.attention_explorer(train_steps=0)
    assert set(explorer.controls) == {"text", "layer", "head"}
    assert explorer.controls["text"].continuous_update is False  # debounced: Enter/blur only
    assert _only_picture(explorer).startswith(PNG_MAGIC)
    assert explorer.png == _only_picture(explorer)


def test_control_change_replaces_the_figure_in_the_same_output():
    explorer = widgets.attention_explorer(train_steps=0)
    output, before, renders = explorer.output, _only_picture(explorer), explorer.renders
    explorer.controls["head"].value = 2
    assert explorer.output is output
    after = _only_picture(explorer)  # still exactly one output: no stacking
    assert after != before
    explorer.controls["layer"].value = 1
    explorer.controls["head"].value = "all"
    _only_picture(explorer)
    assert explorer.renders == renders + 3


def test_bad_text_shows_a_message_instead_of_raising():
    explorer = widgets.attention_explorer(train_steps=0)
    explorer.controls["text"].value = ""
    (message,) = explorer.output.outputs
    assert message["output_type"] == "stream" and "empty" in message["text"]
    assert explorer.png is None
    explorer.controls["text"].value = "a dog!"  # '!' is not in the vocabulary: drawn as '?'
    assert _only_picture(explorer).startswith(PNG_MAGIC)


def test_returning_to_a_setting_is_a_cache_hit():
    explorer = widgets.attention_explorer(train_steps=0)
    explorer.controls["head"].value = 1
    hits = widgets.attention_png.cache_info().hits
    first = explorer.png
    explorer.controls["head"].value = 0
    explorer.controls["head"].value = 1
    assert widgets.attention_png.cache_info().hits >= hits + 2
    assert explorer.png == first


def test_fallback_bundle_has_widget_view_png_and_text():
    explorer = widgets.attention_explorer(train_steps=0)
    bundle = explorer._repr_mimebundle_()
    assert WIDGET_VIEW in bundle
    assert bundle[WIDGET_VIEW]["model_id"] == explorer.widget.model_id
    assert base64.b64decode(bundle["image/png"]) == explorer.png
    assert "head=0" in bundle["text/plain"]


def test_explorers_leave_the_global_random_state_alone():
    state = torch.get_rng_state()
    widgets.attention_explorer(train_steps=3, seed=123)
    widgets.gradient_flow_explorer(depth=2, seed=123)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.slow
def test_trained_model_has_sharper_heads_than_untrained():
    def mean_entropy(train_steps):
        weights = widgets.attention_weights(
            widgets.char_model(train_steps), torch.tensor(widgets.encode(widgets.DEFAULT_TEXT))
        )
        return float(-(weights * weights.clamp_min(1e-9).log()).sum(-1).mean())

    assert mean_entropy(widgets.TRAIN_STEPS) < 0.8 * mean_entropy(0)


def test_attention_weights_match_the_layer_directly():
    model = widgets.char_model(0)
    idx = torch.tensor(widgets.encode("the cat"))
    weights = widgets.attention_weights(model, idx)  # (L, H, T, T)
    assert weights.shape == (2, 4, 7, 7)
    x = model.tok_emb(idx[None]) + model.pos_emb(7)
    _, direct = model.blocks[0].attn(model.blocks[0].norm1(x), return_weights=True)
    torch.testing.assert_close(weights[0], direct[0].detach())
    assert torch.all(weights.triu(1) == 0)  # causal


def test_gradient_flow_explorer_updates_in_place_and_reuses_the_probe():
    explorer = widgets.gradient_flow_explorer(depth=2)
    assert set(explorer.controls) == {"depth", "model", "loss", "init_scale"}
    assert explorer.controls["depth"].continuous_update is False
    before = _only_picture(explorer)
    probes = widgets.gradient_flow.cache_info()
    explorer.controls["model"].value = "post-LN"  # same models: only the picture changes
    assert widgets.gradient_flow.cache_info().hits == probes.hits + 1
    assert widgets.gradient_flow.cache_info().misses == probes.misses
    assert _only_picture(explorer) != before
    explorer.controls["depth"].value = 3
    assert widgets.gradient_flow.cache_info().misses == probes.misses + 1
    _only_picture(explorer)


def test_gradient_flow_matches_the_probe():
    result = widgets.gradient_flow(depth=2, loss="lm")
    assert len(result["pre-LN"]["blocks"]) == len(result["post-LN"]["blocks"]) == 2
    # Same weights, different order of operations: the first block's input gradient differs.
    assert result["pre-LN"]["blocks"] != result["post-LN"]["blocks"]
    scaled = widgets.gradient_flow(depth=2, loss="lm", init_scale=2.0)
    assert scaled["pre-LN"]["blocks"] != result["pre-LN"]["blocks"]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: widgets.attention_explorer(layer=5), "layer must be in 0..1"),
        (lambda: widgets.attention_explorer(head=4), "head must be in 0..3 or 'all'"),
        (lambda: widgets.attention_explorer("x" * 100), "at most 48"),
        (lambda: widgets.attention_explorer(train_steps=-1), "train_steps"),
        (lambda: widgets.gradient_flow_explorer(depth=0), "depth must be"),
        (lambda: widgets.gradient_flow_explorer(loss="mse"), "loss must be one of"),
        (lambda: widgets.gradient_flow_explorer(init_scale=0), "init_scale must be"),
        (lambda: widgets.gradient_flow_explorer(model="mid-LN"), "model must be one of"),
    ],
)
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_explorer_validates_its_arguments():
    with pytest.raises(TypeError, match="render must be callable"):
        widgets.Explorer(None, {"x": None})
    with pytest.raises(ValueError, match="at least one control"):
        widgets.Explorer(lambda: b"", {})


def test_plots_validate_and_draw():
    fig = plots.attention_heatmap(torch.eye(3), ["a", " ", "\n"], title="t")
    assert plots.figure_to_png(fig).startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="2 dimensions"):
        plots.attention_heatmap(torch.ones(2, 3, 3))
    with pytest.raises(ValueError, match="one label per position"):
        plots.attention_heatmap(torch.eye(3), ["a"])
    with pytest.raises(ValueError, match="non-empty mapping"):
        plots.gradient_norms({})
    with pytest.raises(TypeError, match="matplotlib Figure"):
        plots.figure_to_png("figure")
    fig = plots.gradient_norms({"pre-LN": [1.0, 0.0]}, embedding={"pre-LN": 0.5})
    assert fig.axes[0].get_yscale() == "log"


def test_plots_never_register_with_pyplot():
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    widgets.attention_explorer(train_steps=0).controls["head"].value = 3
    assert plt.get_fignums() == open_before


def test_exported_html_shows_the_picture_without_widget_state():
    nbformat = pytest.importorskip("nbformat")
    nbconvert = pytest.importorskip("nbconvert")
    explorer = widgets.gradient_flow_explorer(depth=2)
    bundle = explorer._repr_mimebundle_()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "tc.widgets.gradient_flow_explorer(depth=2)",
            outputs=[nbformat.v4.new_output("display_data", data=bundle)],
        )
    ]
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert f"data:image/png;base64,{bundle['image/png']}" in html
    assert WIDGET_VIEW not in html  # no saved widget state: nbconvert falls back to the PNG


def test_attention_weights_validates_idx():
    with pytest.raises(ValueError, match=r"1-D tensor of token ids \(T,\), got \(1, 3\)"):
        widgets.attention_weights(widgets.char_model(0), torch.zeros(1, 3, dtype=torch.long))
