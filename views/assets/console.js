// The console works without scripts; this adds what only a script can: copy buttons for one-time
// secrets, and a colour picker kept in step with the accent colour's text field.
for (const button of document.querySelectorAll('button.copy[data-copy]')) {
  const source = document.querySelector(`[data-field="${button.dataset.copy}"]`);
  if (!source || !navigator.clipboard) continue;
  button.hidden = false;
  button.addEventListener('click', async () => {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = button.dataset.copied;
  });
}
for (const picker of document.querySelectorAll('input[type=color][data-colour-for]')) {
  const text = document.getElementById(picker.dataset.colourFor);
  if (!text) continue;
  picker.hidden = false;
  picker.addEventListener('input', () => {
    text.value = picker.value;
  });
  text.addEventListener('input', () => {
    if (/^#[0-9a-f]{6}$/i.test(text.value)) picker.value = text.value;
  });
}
