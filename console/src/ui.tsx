/** Small pieces every page uses. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

/** An error line that screen readers announce. */
export function ErrorLine({ error }: { error: string }) {
  if (error === '') return null;
  return (
    <p class="error" role="alert">
      {error}
    </p>
  );
}

/** A table that scrolls sideways on a narrow screen, reachable by keyboard. */
export function TableBox({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be focusable to be scrolled by keyboard
    <section class="table-box" tabIndex={0} aria-label={label}>
      {children}
    </section>
  );
}

/** A modal dialog (the platform's own <dialog>: focus kept inside, Escape closes it). */
export function Modal({ title, onClose, children }: { title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog !== null && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="modal-title" onClose={onClose}>
      <h2 id="modal-title">{title}</h2>
      {children}
    </dialog>
  );
}

/** Copies `text` to the clipboard, with a fallback for pages without clipboard access. */
export async function copy(text: string, fallback: HTMLElement | null): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (fallback !== null) {
      const range = document.createRange();
      range.selectNodeContents(fallback);
      getSelection()?.removeAllRanges();
      getSelection()?.addRange(range);
    }
    return false;
  }
}
