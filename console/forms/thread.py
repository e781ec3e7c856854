from django import forms

MAX_TEXT_LENGTH = 10_000


class ConsoleMessageForm(forms.Form):
    text = forms.CharField(
        label="Message",
        max_length=MAX_TEXT_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Ask your assistant something…"}),
        error_messages={"required": "Type a message first."},
    )

    def clean_text(self) -> str:
        text: str = self.cleaned_data["text"]
        if not text.strip():
            raise forms.ValidationError("Type a message first.", code="blank")
        return text
