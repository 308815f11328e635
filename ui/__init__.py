"""The Gradio app around the ``transformer`` library: one module per tab (``tabs/``), views without gradio
(``views/``), Plotly figures (``figures``), and the services the tabs share."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: nothing leaves the machine

ON_ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")  # as the spaces package reads it

if ON_ZERO_GPU:
    # On a ZeroGPU Space: spaces patches PyTorch before anything starts CUDA; the app's own process keeps its
    # models on the CPU (gpu.models_device) and translations borrow a GPU (gpu.translate).
    import spaces  # noqa: F401
