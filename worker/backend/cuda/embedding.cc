// placeholder: filled in by the layer work
