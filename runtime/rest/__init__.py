"""The Dispatcher's REST API: FastAPI app (app.py), Flink-shaped models, uvicorn server and a Python client."""
