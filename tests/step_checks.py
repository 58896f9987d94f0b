"""What a training step leaves: its gradients, the graphs torch.compile makes of the update (a
backend that records them, what in them would keep CUDA graphs from recording them), and two
compiled-versus-eager checkpoints compared."""

from typing import List


def grads(model) -> dict:
    """{parameter name: a copy of its gradient} of the parameters the last backward reached."""
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def loss_and_grads(criterion, model, sample):
    """One step of ``criterion`` on ``sample`` from zeroed gradients: (loss, sample_size,
    logging output, :func:`grads`)."""
    model.zero_grad()
    loss, sample_size, log = criterion(model, sample)
    loss.backward()
    return loss.detach(), sample_size, log, grads(model)


def recording_aot_eager(graphs: list):
    """torch.compile's ``aot_eager`` backend (AOTAutograd's graph run as traced, no code made)
    that appends each graph it is given to ``graphs``: the aten operators inductor would compile
    and, on a GPU under ``mode="reduce-overhead"``, record as CUDA graphs. A forward graph
    carries the names of the inputs it writes to that are not static addresses
    (``truneg_mutated_inputs``)."""
    import torch
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def keep_forward(gm, example_inputs):
        meta = torch._guards.TracingContext.get().fw_metadata
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        static = set(meta.static_input_indices)
        gm.truneg_mutated_inputs = [
            names[i] for i in meta.mutated_inp_runtime_indices if i not in static
        ]
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    def keep_backward(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=keep_forward, bw_compiler=keep_backward)


def cuda_graph_refusals(graphs) -> List[str]:
    """What in ``graphs`` would keep inductor from recording them as CUDA graphs: an operator
    CUDA graphs refuse (a host read such as ``aten._local_scalar_dense``, a data-dependent
    shape, an operator tagged unsafe; inductor's own test, which runs on any device), an
    input written in place that is not a static address (a parameter, a buffer or a tensor
    marked with ``torch._dynamo.mark_static_address``), or an integer input (a number of the
    batch that dynamo made symbolic: inductor records one CUDA graph per value it takes)."""
    import torch
    from torch._inductor.utils import get_first_incompatible_cudagraph_node

    found = []
    for gm in graphs:
        node = get_first_incompatible_cudagraph_node(gm)
        if node is not None:
            where = (node.meta.get("stack_trace") or "").strip().splitlines()[-2:]
            found.append(f"{node.target}: {' / '.join(line.strip() for line in where)}")
        mutated = getattr(gm, "truneg_mutated_inputs", [])
        if mutated:
            found.append(f"{len(mutated)} mutated inputs not static, e.g. {mutated[:3]}")
        ints = [
            n.name
            for n in gm.graph.nodes
            if n.op == "placeholder" and isinstance(n.meta.get("val"), (int, torch.SymInt))
        ]
        if ints:
            found.append(f"integer inputs (a CUDA graph recorded per value): {ints[:3]}")
    return found


def assert_trained_alike(a: dict, b: dict, bf16: bool) -> None:
    """Two checkpoints of one run, one with a compiled update and one eager: the same weights and
    AdamW moments to rounding (under bf16 a product rounded on the other side of a bf16 step
    moves an Adam update by ~1e-5)."""
    import torch

    tol = dict(rtol=1e-3, atol=1e-4) if bf16 else dict(rtol=1e-4, atol=1e-5)
    assert a["model"].keys() == b["model"].keys()
    for key, value in b["model"].items():
        torch.testing.assert_close(a["model"][key], value, **tol, msg=key)
    moment_tol = dict(rtol=1e-2, atol=1e-5) if bf16 else dict(rtol=1e-4, atol=1e-7)
    moments_a = a["last_optimizer_state"]["state"]
    moments_b = b["last_optimizer_state"]["state"]
    assert moments_a.keys() == moments_b.keys()
    for i in moments_b:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(moments_a[i][key], moments_b[i][key], **moment_tol)
