# nbgrader settings for this course; everything else is nbgrader's default.
c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "pytorch-training-loop-math"

