"""The page's runtime, which every feature of the app stands on and which knows none of them: the ``Page`` that
turns handlers into Gradio events (``page``), what bounds their inputs and limits each client (``bounds``,
``limits``), problems told as sentences (``errors``), costly work shared fairly and run in a process of its own
(``costly``, ``worker``, ``memory``), translations decoded together and on a lent GPU (``batching``, ``gpu``), the
page's components of its own (``chart``, ``components``) and its scripts put in its head (``page_code``)."""
