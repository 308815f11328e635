"""The Gradio app around the ``transformer`` library: one module per tab (``tabs/``), views without gradio
(``views/``), Plotly figures (``figures``), and the services the tabs share."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: nothing leaves the machine
