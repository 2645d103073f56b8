// Recovery codes, shown once: copy them, save them as a file, or print them. The page works without
// this script (the codes are on it to write down); with it, the three buttons appear.
const codes = [...document.querySelectorAll('[data-field="recovery_code"]')].map((c) => c.textContent.trim());
const buttons = document.querySelector('.keep-codes');
if (buttons && codes.length) {
  buttons.hidden = false;
  const text = `${document.title}\n${location.host}\n\n${codes.join('\n')}\n`;
  buttons.addEventListener('click', async (event) => {
    const button = event.target.closest('button[data-codes]');
    if (!button) return;
    if (button.dataset.codes === 'copy') {
      await navigator.clipboard.writeText(codes.join('\n'));
      button.textContent = button.dataset.done;
    } else if (button.dataset.codes === 'download') {
      const link = document.createElement('a');
      link.href = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
      link.download = button.dataset.filename;
      link.click();
      URL.revokeObjectURL(link.href);
    } else {
      window.print();
    }
  });
}
