"""The Gradio app around the ``transformer`` library: the parts of the page (``tabs/``), what they show without
gradio (``views/``), the charts (``drawing/``), the training slot (``training/``), the classes (``classes/``), and
the services the tabs share; ARCHITECTURE.md maps them."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: nothing leaves the machine

ON_ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")  # as the spaces package reads it

if ON_ZERO_GPU:
    # On a ZeroGPU Space: spaces patches PyTorch before anything starts CUDA; the app's own process keeps its
    # models on the CPU (gpu.models_device) and translations borrow a GPU (gpu.translate).
    import spaces  # noqa: F401
