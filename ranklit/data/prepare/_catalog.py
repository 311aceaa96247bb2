"""The datasets ``ranklit data prepare`` knows: their archives, official digests (with where each was read), terms.

One table, :data:`CATALOG`, declares every dataset once; the command's ``--help``, its checks and the docs page
``docs/datasets.md`` follow it. A digest is ``"md5:<hex>"`` or ``"sha256:<hex>"`` as published, with where it was read;
a file may have several (all are checked), or none where no one publishes one (the first download records its SHA-256
in the prepared root, and the command says so). The entries' fields are :mod:`ranklit.data.prepare._entries`; the
layout conversions live in :mod:`ranklit.data.prepare._conversions`.
"""

from __future__ import annotations

from ranklit.data.prepare import _conversions as conversions
from ranklit.data.prepare._entries import Archive, DatasetEntry, Reader

__all__ = ["CATALOG"]

def _dyml(kind: str, configs: tuple[str, ...], readers: tuple[Reader, ...]) -> DatasetEntry:
    return DatasetEntry(
        name=f"dyml-{kind}",
        title=f"DyML-{kind.capitalize()} (Sun et al., CVPR 2021)",
        homepage="https://github.com/SupetZYK/DynamicMetricLearning",
        terms="not stated by the owners (research benchmark)",
        size="size not published",
        folder=f"dyml_{kind}",
        archives=(Archive(f"dyml_{kind}.tar", None),),
        convert=conversions.folder_holding("train/label.csv"),
        readers=readers,
        configs=configs,
        manual=(
            f"DyML is shared through OneDrive (https://1drv.ms/u/s!AsLhhAJIX-_0asLHa5h-56ZZL94?e=KFLdmt) and Baidu "
            f"(https://pan.baidu.com/s/1WJdELF8GdZqS7PkzsL9aRA, password d6nm), links of the DynamicMetricLearning "
            f"README: download the archive of the dyml_{kind} folder (tar or zip), then pass it with --source"
        ),
    )


_DYML_SPLITS = tuple(Reader("ranklit.data.DyML", split) for split in ("train", "query", "gallery"))
_INAT_READERS = tuple(Reader("ranklit.data.INaturalist2018", split, {"levels": "full"}) for split in ("train", "test"))
_OXFORD = "https://www.robots.ox.ac.uk/~vgg/data/oxbuildings/"
_PARIS = "https://www.robots.ox.ac.uk/~vgg/data/parisbuildings/"
_REVISITOP = "http://cmp.felk.cvut.cz/revisitop/data/datasets/"
_R1M = "http://ptak.felk.cvut.cz/revisitop/revisitop1m/"
_INAT = "https://ml-inat-competition-datasets.s3.amazonaws.com/2018/"
_INAT_README = "visipedia/inat_comp 2018/README.md (Data)"
_TFDS = "tensorflow/datasets tensorflow_datasets/"
_TFDS_INAT = f"{_TFDS}image_classification/i_naturalist2018/checksums.tsv"
_R1M_PARTS = tuple(
    Archive(name, f"{_R1M}jpg/{name}", into="jpg") for name in (f"revisitop1m.{i}.tar.gz" for i in range(1, 101))
)
_SMOOTH_AP_SPLITS = "https://drive.google.com/uc?export=download&id=1sXfkBTFDrRU3__-NUs1qBP3sf_0uMB98"
_REVISITED_USAGE = (
    "revisited_eval.yaml reads roxford5k/ and rparis6k/ under this --data.root (prepare both; or "
    "`--data.test_dataset.init_args.names '[roxford5k]'` for one)"
)



_LANDMARKS = "RevisitedLandmarks"


def _revisited(name: str) -> tuple[Reader, ...]:
    return tuple(Reader(f"ranklit.landmarks.{_LANDMARKS}", split, {"name": name}) for split in ("query", "gallery"))


CATALOG: dict[str, DatasetEntry] = {
    e.name: e
    for e in (
        DatasetEntry(
            name="cub",
            title="CUB-200-2011 (Wah et al., 2011)",
            homepage="https://www.vision.caltech.edu/datasets/cub_200_2011/",
            terms="no licence stated; images from Flickr, for research",
            size="1.15 GB",
            folder="CUB_200_2011",
            archives=(
                Archive(
                    "CUB_200_2011.tgz",
                    "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz",
                    (
                        ("md5:97eceeb196236b17998738112f37df78", "TDeVries/cub2011_dataset cub2011.py (tgz_md5)"),
                        (
                            "sha256:0c685df5597a8b24909f6a7c9db6d11e008733779a671760afef78feb49bf081",
                            f"{_TFDS}url_checksums/caltech_birds2011.txt (1,150,585,339 bytes)",
                        ),
                    ),
                ),
            ),
            convert=conversions.folder_holding("images"),
            readers=(Reader("ranklit.data.CUB200", "train"), Reader("ranklit.data.CUB200", "test")),
            configs=("roadmap_cub.yaml", "roadmap_deit_cub.yaml"),
        ),
        DatasetEntry(
            name="sop",
            title="Stanford Online Products (Oh Song et al., CVPR 2016)",
            homepage="https://cvgl.stanford.edu/projects/lifted_struct/",
            terms="no licence stated; images from eBay, for research",
            size="3.08 GB",
            folder="Stanford_Online_Products",
            archives=(
                Archive(
                    "Stanford_Online_Products.zip",
                    "http://ftp.cs.stanford.edu/cs/cvgl/Stanford_Online_Products.zip",
                    (
                        (
                            "sha256:b04fa78210e69fab050ce73939550e1cd0f96890bdd98ec9fee732c3b756ef48",
                            f"{_TFDS}url_checksums/stanford_online_products.txt (3,083,860,082 bytes)",
                        ),
                    ),
                ),
            ),
            convert=conversions.folder_holding("Ebay_train.txt"),
            readers=tuple(Reader("ranklit.data.StanfordOnlineProducts", split) for split in ("train", "test")),
            configs=("roadmap_sop.yaml", "roadmap_deit_sop.yaml", "fastap_sop.yaml", "happier_sop.yaml",
                     "happier_f_sop.yaml"),
        ),
        DatasetEntry(
            name="inshop",
            title="DeepFashion In-Shop Clothes Retrieval (Liu et al., CVPR 2016)",
            homepage="https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html",
            terms="non-commercial research only (DeepFashion agreement)",
            size="size not published",
            folder="inshop",
            archives=(Archive("img.zip", None), Archive("list_eval_partition.txt", None)),
            convert=conversions.folder_holding("list_eval_partition.txt"),
            readers=tuple(Reader("ranklit.data.InShop", split) for split in ("train", "query", "gallery")),
            configs=("fastap_inshop.yaml",),
            manual=(
                "In-Shop is shared through a Google Drive folder linked from "
                "https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html: download Img/img.zip and "
                "Eval/list_eval_partition.txt, then pass both with --source (twice)"
            ),
        ),
        DatasetEntry(
            name="vehicleid",
            title="PKU VehicleID (Liu et al., CVPR 2016)",
            homepage="https://www.pkuml.org/resources/pku-vehicleid.html",
            terms="research only, on request (the owners' form)",
            size="size not published",
            folder="VehicleID_V1.0",
            archives=(Archive("VehicleID_V1.0.zip", None),),
            convert=conversions.folder_holding("train_test_split/train_list.txt"),
            readers=tuple(Reader("ranklit.data.VehicleID", split) for split in ("train", "small", "medium", "large")),
            configs=("fastap_vehicleid.yaml",),
            manual=(
                "VehicleID is sent by its owners on request: fill in the form of "
                "https://www.pkuml.org/resources/pku-vehicleid.html, then pass the archive you receive (the "
                "VehicleID_V1.0 folder, tar or zip) with --source"
            ),
        ),
        DatasetEntry(
            name="inaturalist",
            title="iNaturalist 2018 (Van Horn et al., CVPR 2018) with the Smooth-AP retrieval splits",
            homepage="https://github.com/visipedia/inat_comp/tree/master/2018",
            terms="non-commercial research and education (iNat 2018 terms of use); images not to be redistributed",
            size="120 GB (images) + 26 MB (annotations)",
            folder="inaturalist_2018",
            archives=(
                Archive(
                    "train_val2018.tar.gz",
                    f"{_INAT}train_val2018.tar.gz",
                    (
                        ("md5:b1c6952ce38f31868cc50ea72d066cc3", _INAT_README),
                        (
                            "sha256:276522b02b65d98ee5168a17415b2b1ec971b035bd62959e37b80b1092130495",
                            f"{_TFDS_INAT} (127,945,569,561 bytes)",
                        ),
                    ),
                ),
                Archive(
                    "train2018.json.tar.gz",
                    f"{_INAT}train2018.json.tar.gz",
                    (
                        ("md5:bfa29d89d629cbf04d826a720c0a68b0", _INAT_README),
                        (
                            "sha256:be550dd4e2692458e508dd03e3a8d79f087453e2ad570a438a4ff198a7abc68f",
                            f"{_TFDS_INAT} (20,951,917 bytes)",
                        ),
                    ),
                ),
                Archive(
                    "categories.json.tar.gz",
                    f"{_INAT}categories.json.tar.gz",
                    (
                        (
                            "sha256:2287211e8da582419dc2ca66736005fdb079e0a89eaf38936a441d8277a8162e",
                            f"{_TFDS_INAT} (139,473 bytes)",
                        ),
                    ),
                ),
                Archive("Inat_dataset_splits.zip", _SMOOTH_AP_SPLITS),
            ),
            convert=conversions.inaturalist,
            readers=_INAT_READERS,
            configs=("roadmap_inat.yaml", "smoothap_inat.yaml", "happier_inat_base.yaml", "happier_inat_full.yaml",
                     "happier_f_inat.yaml"),
        ),
        _dyml("animal", ("happier_dyml_animal.yaml",), _DYML_SPLITS),
        _dyml("product", ("happier_dyml_product.yaml",), (*_DYML_SPLITS[:1], Reader("ranklit.data.DyML", "test"))),
        _dyml("vehicle", ("happier_dyml_vehicle.yaml",), _DYML_SPLITS),
        DatasetEntry(
            name="roxford5k",
            title="Revisited Oxford 5k (Radenović et al., CVPR 2018)",
            homepage="http://cmp.felk.cvut.cz/revisitop/",
            terms="images from Flickr (Oxford Buildings); ground truth by revisitop; research use",
            size="size not published",
            folder="revisited",
            subfolder="roxford5k",
            archives=(
                Archive("oxbuild_images.tgz", _OXFORD + "oxbuild_images.tgz", into="jpg"),
                Archive("gnd_roxford5k.pkl", _REVISITOP + "roxford5k/gnd_roxford5k.pkl"),
            ),
            convert=conversions.revisited,
            readers=_revisited("roxford5k"),
            configs=("revisited_eval.yaml",),
            usage=_REVISITED_USAGE,
        ),
        DatasetEntry(
            name="rparis6k",
            title="Revisited Paris 6k (Radenović et al., CVPR 2018)",
            homepage="http://cmp.felk.cvut.cz/revisitop/",
            terms="images from Flickr (Paris Buildings); ground truth by revisitop; research use",
            size="size not published",
            folder="revisited",
            subfolder="rparis6k",
            archives=(
                Archive("paris_1.tgz", _PARIS + "paris_1.tgz", into="jpg"),
                Archive("paris_2.tgz", _PARIS + "paris_2.tgz", into="jpg"),
                Archive("gnd_rparis6k.pkl", _REVISITOP + "rparis6k/gnd_rparis6k.pkl"),
            ),
            convert=conversions.revisited,
            readers=_revisited("rparis6k"),
            configs=("revisited_eval.yaml",),
            usage=_REVISITED_USAGE,
        ),
        DatasetEntry(
            name="r1m",
            title="Revisited 1M distractors, R1M (Radenović et al., CVPR 2018)",
            homepage="http://cmp.felk.cvut.cz/revisitop/",
            terms="images from Flickr; research use (revisitop)",
            size="100 archives, size not published",
            folder="revisited",
            subfolder="revisitop1m",
            archives=(
                *_R1M_PARTS,
                Archive("revisitop1m.txt", f"{_R1M}revisitop1m.txt"),
            ),
            convert=conversions.distractors,
            readers=(Reader("ranklit.data.CSVDataset", None, {"csv_file": "r1m.csv"}),),
            configs=("revisited_eval.yaml",),
            usage=(
                "the distractors are embedded once with `ranklit predict --config revisited_eval.yaml --data.root "
                "ROOT/revisitop1m --data.test_dataset ranklit.data.CSVDataset --data.test_dataset.init_args.csv_file "
                "r1m.csv` (docs/reproducing.md, listwise AP, step 3)"
            ),
        ),
    )
}
