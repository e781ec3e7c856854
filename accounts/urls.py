from django.contrib.auth import views as auth_views
from django.urls import path

from accounts import views
from accounts.forms import EmailAuthenticationForm

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="accounts/login.html",
            authentication_form=EmailAuthenticationForm,
            redirect_authenticated_user=True,
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("settings/", views.contact_settings, name="settings"),
    path("settings/password/", views.ConsolePasswordChangeView.as_view(), name="password_change"),
]
