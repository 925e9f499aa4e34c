"""render_graph: a graph written to a file, as a picture (draw.py) or as the backprop stepper
page (explore.py). A module of its own so that neither of those two imports the other back."""
from pathlib import Path

from .draw import NO_RENDERER, draw_graph, find_renderer, render
from .explore import explore


def render_graph(root, path, format=None, **draw_options):
    """Draw root's graph (draw_graph's options) into the file `path` and return its Path.
    The format (svg, png, jpg, ...) comes from the path's extension unless given; "html" writes
    the backprop stepper page (explore.py), made after backward(retain_graph=True)."""
    path = Path(path)
    format = format or path.suffix.lstrip(".").lower()
    if not format:
        raise ValueError(f"render_graph: cannot tell the image format of '{path}': end the path "
                         "with .svg, .png or .html, or pass format='svg'")
    if format == "html":
        return explore(root, **draw_options).save(path)
    source = draw_graph(root, **draw_options).source
    path.parent.mkdir(parents=True, exist_ok=True)
    if find_renderer() is None:
        dot_file = path.with_suffix(".dot")
        dot_file.write_text(source, encoding="utf-8")
        raise RuntimeError(f"render_graph: {NO_RENDERER}. The graph's source is written to {dot_file}; "
                           f"render it with: graphviz-pure -T{format} -o {path} {dot_file}")
    path.write_bytes(render(source, format))
    return path
