from anyio import Event


async def main() -> None:
    event = Event()
