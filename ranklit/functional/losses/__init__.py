"""The functional losses, one family a file ([spec §2][spec-losses]); their public names are
:mod:`ranklit.functional`'s.

- ``_smooth_rank`` — Smooth-AP and SupAP (ROADMAP); ``_hap`` — the H-AP surrogate of HAPPIER;
- ``_binned_ap`` — FastAP and the listwise mAP_Q / mAP_T loss; ``_blackbox`` — BlackBox AP;
- ``_pair_losses`` — the calibration and contrastive losses; ``_triplet`` — the triplet loss with mining;
- ``_proxies`` — the clustering loss of HAPPIER and CSL.

Public extension points, for a new loss: :mod:`~ranklit.functional.losses.contract` (the checks of a loss's scores and
masks, its per-query terms handed to the reducer, its chunk size) and
:mod:`~ranklit.functional.losses.hyperparameters` (the checks the functional losses and their modules share).

"""
