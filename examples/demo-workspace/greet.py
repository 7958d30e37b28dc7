def greet(name: str) -> str:
    """Return a greeting for `name`."""
    return f"Hello, {name}!"


if __name__ == "__main__":
    print(greet("world"))
