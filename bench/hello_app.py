"""The cold-start bench's "hello" app (bench/cold_start.py deploys it as function_app.py): one
anonymous HTTP Function of the v2 model answering `GET /api/health`, nothing else imported."""

import azure.functions as func

app = func.FunctionApp()


@app.function_name("health")
@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def health(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse('{"status":"ok"}', mimetype="application/json")
