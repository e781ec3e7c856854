from django.contrib.auth import views as auth_views
from django.urls import path

from console import password_reset
from console.forms.accounts import EmailAuthenticationForm
from console.views import accounts as views

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("signup/sent/", views.signup_sent, name="signup_sent"),
    # The token is in the query string, which no log keeps (console/signup_confirmation.py).
    path("signup/confirm/", views.signup_confirm, name="signup_confirm"),
    path(
        "login/",
        views.LoginView.as_view(
            template_name="accounts/login.html",
            authentication_form=EmailAuthenticationForm,
            redirect_authenticated_user=True,
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password-reset/", password_reset.PasswordResetView.as_view(), name="password_reset"),
    path("password-reset/sent/", password_reset.PasswordResetSentView.as_view(), name="password_reset_sent"),
    # The token is in this path only until the view puts it in the session and redirects to .../set-password/; the
    # access log writes the route, not the path (ops/middleware.py).
    path(
        "reset/<uidb64>/<token>/",
        password_reset.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path("reset/done/", password_reset.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    path("settings/", views.contact_settings, name="settings"),
    path("settings/password/", views.ConsolePasswordChangeView.as_view(), name="password_change"),
    path("settings/delete-history/", views.delete_history, name="delete_history"),
    path("settings/delete-account/", views.delete_account, name="delete_account"),
]
