"""Sandbox images: the catalog of sandbox_images/ and its builds, and a project's own image (its Dockerfile
or devcontainer.json) with the build context sent to the engine."""

from ._base_plan import BaseFacts, BasePlan, plan_base
from ._cancel import BuildCancel, BuildCancelled
from ._catalog import (
    ImageSpec,
    ImageStatus,
    base_plan,
    build_base_image,
    build_image,
    image_name_for_tag,
    images_dir,
    list_images,
    load_catalog,
    resolve_image,
)
from ._project_image import (
    ProjectImageBuild,
    ProjectImageSource,
    build_project_image,
    find_project_image,
    project_image_digest,
    project_image_files,
    project_image_tag,
    refuse_loosening,
)

__all__ = [
    "BaseFacts",
    "BasePlan",
    "BuildCancel",
    "BuildCancelled",
    "ImageSpec",
    "ImageStatus",
    "ProjectImageBuild",
    "ProjectImageSource",
    "base_plan",
    "build_base_image",
    "build_image",
    "build_project_image",
    "find_project_image",
    "image_name_for_tag",
    "images_dir",
    "list_images",
    "load_catalog",
    "plan_base",
    "project_image_digest",
    "project_image_files",
    "project_image_tag",
    "refuse_loosening",
    "resolve_image",
]
