// Present so that main.go may declare the body-less go:linkname function.
