"""Whether this Paddle can run the ops' CUDA kernels: asked once, here, by
every command that needs a GPU (simulate --device gpu, bench --device gpu,
bench-gpu), so each refuses for the same reasons in the same words."""

from __future__ import annotations

from typing import Optional


def gpu_problem(what: str) -> Optional[str]:
    """Why `what` (a command or flag, the start of the message) cannot run on a
    GPU here, or None where it can. Two causes are told apart: a Paddle built
    without CUDA (install paddlepaddle-gpu) and a CUDA build that sees no GPU
    (the driver, CUDA_VISIBLE_DEVICES, the machine)."""
    import paddle

    if not paddle.is_compiled_with_cuda():
        return (f"{what} needs a CUDA build of Paddle (paddlepaddle-gpu); this is "
                f"paddle {paddle.__version__} without CUDA")
    if paddle.device.cuda.device_count() < 1:
        return f"{what} needs a GPU, and this CUDA build of Paddle sees none"
    return None
