"""QR codes for receipts: the provider's ``qrCodeString``, or the offline QR of a deferred sale.

A receipt prints the QR code of :attr:`DocumentResult.qr_code_string
<invoicing_async.DocumentResult.qr_code_string>` (the provider returns it with the mark,
and only then: keep it with the sale). A sale deferred while the provider is down
prints the provider's *offline QR* instead (:func:`offline_qr_url`), and the real one
when its mark arrives::

    from invoicing_async import qr

    svg = qr.render_svg(result)                   # a DocumentResult, or any text
    png = qr.render_png(receipt.offline_qr_url, scale=6)
    print(qr.render_text(result))                 # for a terminal

Rendering needs the ``qr`` extra (segno, pure Python, no dependency of its own):
``pip install 'invoicing-async[qr]'``. :func:`offline_qr_url` does not.

.. versionadded:: 0.3.0
"""

from invoicing_async._doc.qr import offline_qr_url, render_png, render_svg, render_text

__all__ = ["offline_qr_url", "render_png", "render_svg", "render_text"]
