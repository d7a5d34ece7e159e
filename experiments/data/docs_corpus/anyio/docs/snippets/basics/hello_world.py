from anyio import run


async def main() -> None:
    print("Hello, world!")


run(main)
