from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path


def home(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello from production\n", content_type="text/plain")


def items(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"items": [1, 2, 3], "host": request.get_host()})


urlpatterns = [path("", home), path("items", items)]
