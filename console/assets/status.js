// The page's one aria-live="polite" region (index.html #status): results and failures are announced there.

let clearTimer = null;

/** Announces `message` to screen readers (and shows it in the status line); '' clears it. */
export function announce(message) {
  const region = document.getElementById('status');
  if (!region) return;
  clearTimeout(clearTimer);
  // A change of text is what gets announced: clear first, so the same message twice is read twice.
  region.textContent = '';
  if (message === '') return;
  setTimeout(() => {
    region.textContent = message;
  }, 30);
  clearTimer = setTimeout(() => {
    region.textContent = '';
  }, 15_000);
}
