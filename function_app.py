"""The Azure Functions entry point: composition only. Importing this opens nothing."""

import azure.functions as func

from api_funcs.functions import bp as http_functions
from relay_func import bp as relay_functions

app = func.FunctionApp()
app.register_functions(http_functions)
app.register_functions(relay_functions)
