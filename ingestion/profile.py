"""GET /api/v1/user/profile: who a key (or the CLI's log-in token, a V2 key) belongs to; `poke whoami` prints it."""

from django.contrib.auth.models import User
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingestion import openapi
from ingestion.authentication import AnyKeyAuthentication, key_of
from ingestion.negotiation import JsonOnly
from keys.scopes import Scope


class ProfileView(APIView):
    # V1 keys too: telling a key's holder whose key it is sends nothing, like reading a receipt; the deprecation of
    # V1 is about the legacy sending endpoint, and refusing here would only hide which account a stray key is of.
    authentication_classes = [AnyKeyAuthentication]
    http_method_names = ["get", "head", "options"]
    content_negotiation_class = JsonOnly
    required_scopes = {"GET": Scope.PROFILE_READ}

    @openapi.profile_endpoint
    def get(self, request: Request) -> Response:
        key = key_of(request)
        # The lookup loads only the owner's id and is_active (ingestion/hotpath/lookup.py): the rest in one query,
        # not one per deferred field.
        owner = User.objects.only("first_name", "last_name", "email").get(pk=key.owner_id)
        # null, not "", when there is no name: the CLI prints name, else email, else id.
        return Response(
            {"success": True, "id": owner.pk, "name": owner.get_full_name().strip() or None, "email": owner.email}
        )
